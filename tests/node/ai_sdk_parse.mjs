// Parse an SSE body (stdin) with the `ai` package's own UI message stream parser, the one
// useChat's DefaultChatTransport uses: every chunk against uiMessageChunkSchema, then the
// chunks folded into the assistant UIMessage by readUIMessageStream. Prints one JSON object.
import { readFileSync } from "node:fs";
import { parseJsonEventStream } from "@ai-sdk/provider-utils";
import { readUIMessageStream, uiMessageChunkSchema } from "ai";

const body = readFileSync(0);
const bytes = new ReadableStream({
  start(c) {
    c.enqueue(new Uint8Array(body));
    c.close();
  },
});
const chunks = [];
const failures = [];
const parsed = parseJsonEventStream({ stream: bytes, schema: uiMessageChunkSchema }).pipeThrough(
  new TransformStream({
    transform(part, controller) {
      if (part.success) {
        chunks.push(part.value);
        controller.enqueue(part.value);
      } else {
        failures.push(String(part.error));
      }
    },
  }),
);
let message = null;
const errors = [];
for await (const m of readUIMessageStream({ stream: parsed, onError: (e) => errors.push(String(e)) })) {
  message = m;
}
console.log(JSON.stringify({ chunks, failures, errors, message }));
