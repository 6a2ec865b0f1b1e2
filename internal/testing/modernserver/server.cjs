// A 2026-07-28 MCP server built with the official TypeScript SDK v2
// (@modelcontextprotocol/server, pinned in packaging/npm), for mcpgate's
// tests of backends of that era. Run by node with NODE_PATH set to the
// node_modules that packaging/ci/deps.sh installs:
//
//   node server.cjs stdio   serve on stdin and stdout
//   node server.cjs http    serve POST /mcp on 127.0.0.1, a free port;
//                           the first line on stdout is "listening PORT"
//   node server.cjs unix P  serve POST /mcp on the unix socket P; the first
//                           line on stdout is "listening P"
//
// Tools: echo {text}; confirm {action}, which asks for an elicitation and
// ask {question}, which asks for a sampling, both with an input_required
// result; add_tool {name}, which registers a tool and announces it on
// subscriptions/listen streams; touch, which announces an update of the
// resource note://one to the streams subscribed to it.
'use strict';
const http = require('node:http');
const { McpServer, createMcpHandler, inputRequired, inputResponse } = require('@modelcontextprotocol/server');
const { serveStdio } = require('@modelcontextprotocol/server/stdio');
const z = require('zod');

const added = []; // names registered by add_tool, for every instance
let announce = () => {};
let touched = () => {};

// state is the requestState the client echoed, "" if none.
function state(ctx) {
	const rs = ctx.mcpReq.requestState;
	return String((typeof rs === 'function' ? rs() : rs) ?? '');
}

function build() {
	const server = new McpServer({ name: 'modern-fixture', version: '2.4.0' }, { capabilities: { resources: { subscribe: true } } });
	server.registerResource('note', 'note://one', { mimeType: 'text/plain' }, async () => ({ contents: [{ uri: 'note://one', text: 'a note' }] }));
	server.registerTool('touch', { description: 'Announces an update of note://one' }, async () => {
		touched(server);
		return { content: [{ type: 'text', text: 'touched' }] };
	});
	server.registerTool('echo', { description: 'Echo text', inputSchema: z.object({ text: z.string() }) },
		async ({ text }) => ({ content: [{ type: 'text', text: 'echo: ' + text }] }));
	server.registerTool('confirm', { description: 'Asks the user to confirm an action', inputSchema: z.object({ action: z.string() }) },
		async ({ action }, ctx) => {
			const view = inputResponse(ctx.mcpReq.inputResponses, 'confirm');
			if (view.kind === 'missing') {
				return inputRequired({
					inputRequests: {
						confirm: inputRequired.elicit({
							message: 'Really ' + action + '?',
							requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
						}),
					},
					requestState: 'round-1:' + action,
				});
			}
			if (view.kind !== 'elicit' || view.action !== 'accept') {
				return { content: [{ type: 'text', text: 'declined ' + action }] };
			}
			return { content: [{ type: 'text', text: 'confirmed ' + action + ': ' + JSON.stringify(view.content) + ' state ' + state(ctx) }] };
		});
	server.registerTool('ask', { description: 'Asks the client model a question', inputSchema: z.object({ question: z.string() }) },
		async ({ question }, ctx) => {
			const view = inputResponse(ctx.mcpReq.inputResponses, 'answer');
			if (view.kind !== 'sampling') {
				return inputRequired({
					inputRequests: {
						answer: inputRequired.createMessage({
							messages: [{ role: 'user', content: { type: 'text', text: question } }],
							maxTokens: 50,
						}),
					},
				});
			}
			const c = view.result.content;
			return { content: [{ type: 'text', text: 'the model said: ' + (Array.isArray(c) ? c[0].text : c.text) }] };
		});
	server.registerTool('add_tool', { description: 'Registers a tool', inputSchema: z.object({ name: z.string() }) },
		async ({ name }) => {
			added.push(name);
			addTool(server, name); // an instance that lives on (stdio) announces it itself
			announce();
			return { content: [{ type: 'text', text: 'added ' + name }] };
		});
	for (const name of added) addTool(server, name);
	return server;
}

function addTool(server, name) {
	server.registerTool(name, { description: 'Added at run time' }, async () => ({ content: [{ type: 'text', text: name }] }));
}

function serveHTTP(socket) {
	const handler = createMcpHandler(() => build());
	announce = () => handler.notify.toolsChanged();
	touched = () => handler.notify.resourceUpdated('note://one');
	const srv = http.createServer(async (req, res) => {
		try {
			const chunks = [];
			for await (const c of req) chunks.push(c);
			const headers = new Headers();
			for (const [k, v] of Object.entries(req.headers)) {
				if (typeof v === 'string') headers.set(k, v);
			}
			const ac = new AbortController();
			res.on('close', () => ac.abort());
			const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks);
			const response = await handler.fetch(new Request('http://' + req.headers.host + req.url, { method: req.method, headers, body, signal: ac.signal }));
			res.writeHead(response.status, Object.fromEntries(response.headers));
			if (response.body) {
				for await (const chunk of response.body) res.write(chunk);
			}
			res.end();
		} catch (err) {
			if (!res.headersSent) res.writeHead(500);
			res.end();
		}
	});
	const listening = () => process.stdout.write('listening ' + (socket || srv.address().port) + '\n');
	if (socket) {
		srv.listen(socket, listening);
	} else {
		srv.listen(0, '127.0.0.1', listening);
	}
	process.on('SIGTERM', () => process.exit(0));
}

if (process.argv[2] === 'http') {
	serveHTTP();
} else if (process.argv[2] === 'unix') {
	serveHTTP(process.argv[3]);
} else {
	touched = (server) => server.server.sendResourceUpdated({ uri: 'note://one' });
	serveStdio(() => build());
}
