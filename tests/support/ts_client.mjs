// The official TypeScript SDK's client against a generated billing server; run by tests/test_client_matrix.py
// with the project's pinned Node (tooling/):
//
//   node ts_client.mjs SDK_ESM_URL http URL [UPDATE_JSON]
//   node ts_client.mjs SDK_ESM_URL stdio PYTHON SERVER_DIR [UPDATE_JSON]
//
// The SDK speaks the handshake era only. listTools makes the client cache a validator per outputSchema
// (Ajv, formats included); every callTool then throws if its structuredContent does not validate, so a
// result that arrives at all was accepted. The script checks that the same validator refuses a malformed
// date, so that acceptance is not vacuous, then calls invoice_submit (bound to the workflow's draft state)
// and waits for the notifications/tools/list_changed its transition sends. With UPDATE_JSON (`[tool, arguments]`),
// it last makes that call (a mutation whose result says which reads it made stale). It prints one JSON object.
const [, , sdk, transportKind, ...rest] = process.argv;
const [target, serverDir] = transportKind === "http" ? [rest[0], undefined] : rest;
const updateJson = rest[transportKind === "http" ? 1 : 2];
const { Client } = await import(sdk + "/client/index.js");
const { StreamableHTTPClientTransport } = await import(sdk + "/client/streamableHttp.js");
const { StdioClientTransport } = await import(sdk + "/client/stdio.js");
const { AjvJsonSchemaValidator } = await import(sdk + "/validation/ajv-provider.js");
const { ToolListChangedNotificationSchema } = await import(sdk + "/types.js");

// Generous: only a server that never sends the notification waits this long, and the test then fails.
const LIST_CHANGED_TIMEOUT_MS = 30000;

const client = new Client({ name: "fusiongen-client-matrix", version: "1.0.0" });
let signalListChanged;
const listChanged = new Promise((resolve) => {
  signalListChanged = resolve;
});
client.setNotificationHandler(ToolListChangedNotificationSchema, () => signalListChanged(true));

const transport =
  transportKind === "http"
    ? new StreamableHTTPClientTransport(new URL(target))
    : new StdioClientTransport({ command: target, args: ["-m", "billing_server"], cwd: serverDir, env: { PYTHONPATH: serverDir } });
await client.connect(transport);

const before = await client.listTools();
const get = await client.callTool({ name: "invoice_get", arguments: { id: "inv-1" } });
const list = await client.callTool({ name: "invoice_list", arguments: {} });
const invalid = await client.callTool({ name: "invoice_get", arguments: { idx: "inv-1" } });

const schema = before.tools.find((tool) => tool.name === "invoice_get").outputSchema;
const validate = new AjvJsonSchemaValidator().getValidator(schema);
const malformed = { ...get.structuredContent, data: { ...get.structuredContent.data, due_date: "1 Oct 2026" } };
const validator = { acceptsResult: validate(get.structuredContent).valid, refusesMalformedDate: !validate(malformed).valid };

const submit = await client.callTool({ name: "invoice_submit", arguments: { invoice_id: "inv-2" } });
let timer;
const timeout = new Promise((resolve) => {
  timer = setTimeout(() => resolve(false), LIST_CHANGED_TIMEOUT_MS);
});
const listChangedReceived = await Promise.race([listChanged, timeout]);
clearTimeout(timer);
const after = await client.listTools();
let update = null;
if (updateJson !== undefined) {
  const [name, args] = JSON.parse(updateJson);
  update = await client.callTool({ name, arguments: args });
}
await client.close();

console.log(
  JSON.stringify({
    server: client.getServerVersion(),
    before: before.tools.map((tool) => tool.name),
    after: after.tools.map((tool) => tool.name),
    validator,
    get,
    list,
    invalid,
    submit,
    listChangedReceived,
    update,
  }),
);
