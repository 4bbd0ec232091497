#!/bin/bash
# The Lambda Web Adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap) runs this instead of a Python
# handler; it forwards each invocation to the app over HTTP on AWS_LWA_PORT and streams the
# answer back (AWS_LWA_INVOKE_MODE=response_stream). The function's own packages (uvicorn) are
# in LAMBDA_TASK_ROOT, the threads_aws layer in /opt/python.
export PYTHONPATH="$LAMBDA_TASK_ROOT:/opt/python${PYTHONPATH:+:$PYTHONPATH}"
exec python3 -m uvicorn --host 127.0.0.1 --port "${AWS_LWA_PORT:-8080}" --no-access-log \
  --log-level warning --lifespan off --timeout-keep-alive 60 main:app
