// MCP Fusion's invoice tool (the shared harness's invoice.ts) served over streamable HTTP, for bench/mcpfusion_http.py.
// Built by bench/mcpfusion_http.py with the harness's node_modules and esbuild: it is copied beside invoice.ts
// into $FUSION_NM, so './invoice.js' is the harness's own registry, unchanged.
//
//   node http_server.js sse PORT    MCP Fusion's own HTTP server: startServer({transport: 'http'}), as MCP Fusion
//                                   documents it. Every POST is answered with an SSE stream (startServer gives the
//                                   TS SDK transport no enableJsonResponse); its per-session rate limit (600/min by
//                                   default) is raised out of the way of a benchmark.
//   node http_server.js json PORT   The same registry attached to the same TS SDK Server the way startServer does
//                                   it, on the TS SDK's NodeStreamableHTTPServerTransport with enableJsonResponse:
//                                   the fastest mode the TS stack offers (one JSON body per POST, no SSE framing).
// Both are stateful (handshake era): initialize opens a session, named by the Mcp-Session-Id header.
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { startServer } from '@mcpfusion/core';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { Server } from '@modelcontextprotocol/server';
import { buildRegistry } from './invoice.js';

const [mode = 'sse', portText = '3001'] = process.argv.slice(2);
const port = Number(portText);
const registry = await buildRegistry();

if (mode === 'sse') {
    await startServer({ name: 'perfbill', version: '0.1.0', registry, transport: 'http', port, telemetry: false,
        rateLimitPerMinute: 1_000_000_000 });
} else if (mode === 'json') {
    const sessions = new Map<string, NodeStreamableHTTPServerTransport>();
    const http = createServer(async (req, res) => {
        try {
            if ((req.url ?? '/').split('?')[0] !== '/mcp') { res.writeHead(404).end(); return; }
            const id = req.headers['mcp-session-id'];
            const known = typeof id === 'string' ? sessions.get(id) : undefined;
            if (known) { await known.handleRequest(req, res); return; }
            if (req.method !== 'POST' || id !== undefined) { res.writeHead(400).end('Missing or invalid session'); return; }
            // A new session: one SDK Server per session, as the TS SDK's stateful examples and startServer do.
            const server = new Server({ name: 'perfbill', version: '0.1.0' }, { capabilities: { tools: {} } });
            await registry.attachToServer(server);
            const transport = new NodeStreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                enableJsonResponse: true,
                onsessioninitialized: (sid) => { sessions.set(sid, transport); },
            });
            transport.onclose = () => { if (transport.sessionId) sessions.delete(transport.sessionId); };
            await server.connect(transport);
            await transport.handleRequest(req, res);
        } catch (err) {
            console.error('http_server:', err);
            if (!res.headersSent) res.writeHead(500).end();
        }
    });
    http.listen(port, '127.0.0.1', () => process.stderr.write(`perfbill (json) on http://127.0.0.1:${port}/mcp\n`));
} else {
    throw new Error(`unknown mode ${mode}: sse or json`);
}
