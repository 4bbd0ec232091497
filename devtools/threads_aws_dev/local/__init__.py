"""The host on one machine (`threads-aws dev`): moto for DynamoDB/S3/SQS, an API Gateway (REST)
emulation in front of template.yaml's functions, and SQS pollers for its event sources. Dev-only:
it needs the `[dev]` extras (moto server) and is never imported by a Lambda handler."""
