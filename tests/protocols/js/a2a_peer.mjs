// A peer agent written against the official JavaScript SDK (@a2a-js/sdk, pinned in package.json): it discovers
// Semantic Saga from its public agent card, then sends `begin` and `get` as structured commands (one data part
// each) with a bearer token, and prints what it saw as one JSON line for tests/protocols/test_a2a_js_client.py.
//
// usage: node a2a_peer.mjs <base url> <bearer token>
import { randomUUID } from "node:crypto";

import { Role, taskStateToJSON } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from "@a2a-js/sdk/client";

const [base, token] = process.argv.slice(2);
if (!base || !token) {
  console.error("usage: node a2a_peer.mjs <base url> <bearer token>");
  process.exit(2);
}

// The card is public; only the JSON-RPC calls carry the token.
const withToken = (url, init = {}) =>
  fetch(url, { ...init, headers: { ...(init.headers ?? {}), Authorization: `Bearer ${token}` } });
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: withToken })],
  }),
);
const cardResponse = await fetch(`${base}/.well-known/agent-card.json`);
const card = await cardResponse.json();
const client = await factory.createFromUrl(base);

const command = (data) => ({
  message: {
    messageId: randomUUID(),
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "data", value: data }, mediaType: "application/json", filename: "" }],
  },
});
const resultOf = (task) => task.artifacts[0].parts[0].content.value;
// sendMessage answers a Task or a Message (SendMessageResult); Semantic Saga always answers a Task.
const asTask = (answer) => {
  if (!("status" in answer)) throw new Error(`expected a task, got ${JSON.stringify(answer)}`);
  return answer;
};

const begun = await client.sendMessage(command({ operation: "begin", metadata: { peer: "a2a-js", attempt: 1 } }));
const beginTask = asTask(begun);
const sagaId = resultOf(beginTask).id;
const gotten = await client.sendMessage(command({ operation: "get", saga_id: sagaId }));
const getTask = asTask(gotten);
const reread = await client.getTask({ id: beginTask.id });

console.log(
  JSON.stringify({
    protocolVersion: client.protocolVersion,
    interfaces: card.supportedInterfaces,
    begin: { id: beginTask.id, contextId: beginTask.contextId, state: taskStateToJSON(beginTask.status.state), result: resultOf(beginTask) },
    get: { state: taskStateToJSON(getTask.status.state), artifact: getTask.artifacts[0].name, result: resultOf(getTask) },
    reread: { id: reread.id, state: taskStateToJSON(reread.status.state) },
  }),
);
