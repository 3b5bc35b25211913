// Drives `klspec serve` with the official OpenAI client library (npm `openai`, found through NODE_PATH):
// /v1/completions and /v1/chat/completions, plain and streamed, chat with logprobs. Prints one JSON object with what the
// client got; tests/server/test_server.cpp checks it.
//   NODE_PATH=$(scripts/npm-openai.sh) node tests/server/openai_client.cjs BASE_URL MODEL
"use strict";
const OpenAI = require("openai");

async function main() {
  const [baseURL, model] = process.argv.slice(2);
  const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
  const completionRequest = { model, prompt: "Once upon a time", max_tokens: 32 };
  const chatRequest = {
    model, messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 32, logprobs: true, top_logprobs: 2,
  };
  const tokensOf = (logprobs) => (logprobs?.content ?? []).map((entry) => entry.token);

  const completion = await client.completions.create(completionRequest);
  let completionStreamed = "";
  for await (const chunk of await client.completions.create({ ...completionRequest, stream: true }))
    completionStreamed += chunk.choices[0]?.text ?? "";

  const chat = await client.chat.completions.create(chatRequest);
  let chatStreamed = "";
  let role = null;
  const streamedTokens = [];
  for await (const chunk of await client.chat.completions.create({ ...chatRequest, stream: true })) {
    const delta = chunk.choices[0]?.delta ?? {};
    role ??= delta.role ?? null;
    chatStreamed += delta.content ?? "";
    streamedTokens.push(...tokensOf(chunk.choices[0]?.logprobs));
  }

  const models = await client.models.list();
  console.log(JSON.stringify({
    completion: completion.choices[0].text,
    completion_finish_reason: completion.choices[0].finish_reason,
    completion_tokens: completion.usage.completion_tokens,
    completion_streamed: completionStreamed,
    chat: chat.choices[0].message.content,
    chat_role: chat.choices[0].message.role,
    chat_logprob_tokens: tokensOf(chat.choices[0].logprobs),
    chat_top_logprobs: (chat.choices[0].logprobs?.content ?? []).map((entry) => entry.top_logprobs.length),
    chat_streamed: chatStreamed,
    chat_streamed_role: role,
    chat_streamed_logprob_tokens: streamedTokens,
    models: models.data.map((m) => m.id),
  }));
}

main().catch((error) => {
  console.error(`openai_client: ${error.message}`);
  process.exit(1);
});
