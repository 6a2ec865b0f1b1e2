// everything-server-2026 is mcpgate's conformance fixture for MCP 2026-07-28,
// written for mcpgate's tests on the TypeScript SDK v2 packages pinned beside
// it (@modelcontextprotocol/server). It offers what the scenarios of
// @modelcontextprotocol/conformance 0.2.0's 2026-07-28 requirement set call
// by name: the test_* tools, resources and prompts, the in-band input
// (InputRequiredResult) tools, and the listen triggers; and, in
// tasks-2026.mjs beside it, what its task scenarios (the
// io.modelcontextprotocol/tasks extension) call.
//
// Usage:
//   node everything-server-2026.mjs --stdio            serve stdio (both eras)
//   node everything-server-2026.mjs --stdio-2025       serve stdio as a
//       2025-11-25 server only: initialize, no server/discover (-32601); the
//       in-band input tools then send sampling, elicitation and roots
//       requests to the client on the session, as 2025 servers do
//   node everything-server-2026.mjs --http HOST:PORT   serve HTTP at /mcp
//
// Over HTTP it answers 2026-07-28 requests statelessly and 2025-era requests
// with the SDK's stateless fallback; over stdio the first message picks the
// era for the connection. packaging/ci/deps.sh copies this file next to the
// node_modules it imports from.
//
// With OTEL_EXPORTER_OTLP_ENDPOINT set it traces, with the OpenTelemetry JS
// SDK: every tool call is a SERVER span, the child of the trace context in
// the request's _meta (traceparent, tracestate, as SEP-414 has them),
// exported over OTLP/HTTP as it ends. Over HTTP its attribute
// test.http.parent_span_id is the span of the request's traceparent
// header, so that a test sees what a client sent in both.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { Readable } from 'node:stream';

import {
    acceptedContent,
    CLIENT_CAPABILITIES_META_KEY,
    createMcpHandler,
    createRequestStateCodec,
    hostHeaderValidationResponse,
    inputRequired,
    localhostAllowedHostnames,
    McpServer,
    ProtocolError,
    ProtocolErrorCode,
    ResourceTemplate
} from '@modelcontextprotocol/server';
import { serveStdio, StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import * as z from 'zod/v4';

import { registerTaskMethods, registerTaskTools, TASKS_EXTENSION } from './tasks-2026.mjs';

// tracer is set when the environment asks for traces (see above).
const tracer = process.env.OTEL_EXPORTER_OTLP_ENDPOINT ? startTracing() : undefined;

function startTracing() {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const provider = new TracerProvider({
        resource: resourceFromAttributes({ 'service.name': process.env.OTEL_SERVICE_NAME || 'everything-server-2026' }),
        spanProcessors: [new SimpleSpanProcessor({ exporter: new OTLPTraceExporter() })]
    });
    trace.setGlobalTracerProvider(provider);
    return provider.getTracer('everything-server-2026');
}

// traced wraps a tool's callback (whose last argument is the SDK's request
// context) in the span of its call.
function traced(name, fn) {
    if (!tracer) return fn;
    return async (...args) => {
        const meta = args[args.length - 1]?.mcpReq?._meta ?? {};
        const attributes = { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': name };
        const header = trace.getSpanContext(context.active());
        if (header) attributes['test.http.parent_span_id'] = header.spanId;
        const parent = propagation.extract(ROOT_CONTEXT, meta);
        return tracer.startActiveSpan(`tools/call ${name}`, { kind: SpanKind.SERVER, attributes }, parent, async (span) => {
            try {
                return await fn(...args);
            } catch (err) {
                span.setStatus({ code: SpanStatusCode.ERROR, message: String(err?.message ?? err) });
                throw err;
            } finally {
                span.end();
            }
        });
    };
}

// A 1x1 PNG and a silent WAV: the smallest valid media for content checks.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';

// requestState leaves the server and comes back from the client, so it is
// sealed (HMAC with a per-process key and a TTL) and verified before any
// handler sees it: a tampered state is refused with -32602.
const stateCodec = createRequestStateCodec({ key: crypto.getRandomValues(new Uint8Array(32)) });

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const askString = (message, field) =>
    inputRequired.elicit({
        message,
        requestedSchema: { type: 'object', properties: { [field]: { type: 'string' } }, required: [field] }
    });
const askConfirm = () =>
    inputRequired.elicit({
        message: 'Please confirm',
        requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] }
    });
const askModel = (prompt, maxTokens) =>
    inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens });

// handler is the HTTP entry; the listen triggers publish on its bus. Over
// stdio, where one server serves the connection, they notify through it.
let handler;

// shown says whether the transient tool and prompt are listed. Over HTTP
// every request gets a new server: the state lives here.
const shown = { tool: false, prompt: false };

// transient holds this server's handles of the transient tool and prompt.
function tools(server, transient) {
    const noArgs = { inputSchema: z.object({}) };
    const tool = (name, description, fn, extra = noArgs) => server.registerTool(name, { description, ...extra }, traced(name, fn));

    tool('test_simple_text', 'Returns one text content', async () => text('This is a simple text response for testing.'));
    tool('test_image_content', 'Returns one image content', async () => ({
        content: [{ type: 'image', data: PNG, mimeType: 'image/png' }]
    }));
    tool('test_audio_content', 'Returns one audio content', async () => ({
        content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }]
    }));
    tool('test_embedded_resource', 'Returns one embedded resource', async () => ({
        content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }]
    }));
    tool('test_multiple_content_types', 'Returns text, an image and a resource', async () => ({
        content: [
            { type: 'text', text: 'Multiple content types test:' },
            { type: 'image', data: PNG, mimeType: 'image/png' },
            { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } }
        ]
    }));
    tool('test_tool_with_logging', 'Logs three messages while it runs', async (_args, ctx) => {
        for (const step of ['Tool execution started', 'Tool processing data', 'Tool execution completed']) {
            await ctx.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', data: step } });
        }
        return text('Tool with logging executed successfully');
    });
    tool('test_tool_with_progress', 'Reports progress 0, 50, 100 when given a token', async (_args, ctx) => {
        const token = ctx.mcpReq._meta?.progressToken;
        if (token !== undefined) {
            for (const progress of [0, 50, 100]) {
                await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } });
                if (progress < 100) await sleep(20);
            }
        }
        return text(String(token ?? 'no-progress-token'));
    });
    tool('test_error_handling', 'Always fails', async () => {
        throw new Error('This tool intentionally returns an error for testing');
    });
    tool('test_logging_tool', 'Logs through the request, gated on its logLevel', async (_args, ctx) => {
        await ctx.mcpReq.log('info', 'test_logging_tool ran');
        return text('logged');
    });
    tool('test_streaming_elicitation', 'Answers with a plain result: no request on the stream', async () => text('result only'));
    // The triggers really change the lists (a gateway may announce only
    // what changed): they show or hide a transient tool and prompt.
    transient.tool = server.registerTool(
        '__transient_tool_for_list_changed',
        { description: 'Listed only while test_trigger_tool_change has shown it', inputSchema: z.object({}) },
        async () => text('transient')
    );
    if (!shown.tool) transient.tool.disable();
    tool('test_trigger_tool_change', 'Shows or hides a transient tool, announcing the change', async () => {
        shown.tool = !shown.tool;
        if (handler) handler.notify.toolsChanged();
        else if (shown.tool) transient.tool.enable();
        else transient.tool.disable();
        return text('tools_list_changed published');
    });
    tool('test_trigger_prompt_change', 'Shows or hides a transient prompt, announcing the change', async () => {
        shown.prompt = !shown.prompt;
        if (handler) handler.notify.promptsChanged();
        else if (shown.prompt) transient.prompt.enable();
        else transient.prompt.disable();
        return text('prompts_list_changed published');
    });

    // Tools that ask the client mid-call. A 2026 server answers with an
    // InputRequiredResult and reads the answers from the retry; in
    // --stdio-2025 mode the same tools behave as a 2025 server's: they send
    // the requests to the client on the session and await the answers (see
    // ask).
    tool('test_missing_capability', 'Needs the sampling capability', async (_args, ctx) => {
        const responses = await ask(ctx, { llm_answer: askModel('Reply with the single word: pong', 16) });
        if (responses?.llm_answer === undefined) {
            return inputRequired({ inputRequests: { llm_answer: askModel('Reply with the single word: pong', 16) } });
        }
        return text('sampled');
    });
    tool('test_sampling', 'Asks the client for a completion', async (args, ctx) => {
        const requests = { answer: askModel(args.prompt, 100) };
        const answer = (await ask(ctx, requests))?.answer;
        if (answer === undefined) return inputRequired({ inputRequests: requests });
        return text(`LLM response: ${answer.content?.text ?? 'No response'}`);
    }, { inputSchema: z.object({ prompt: z.string() }) });
    tool('test_elicitation', 'Asks the user for input', async (args, ctx) => {
        const requests = {
            answer: inputRequired.elicit({
                message: args.message,
                requestedSchema: {
                    type: 'object',
                    properties: { username: { type: 'string' }, email: { type: 'string' } },
                    required: ['username', 'email']
                }
            })
        };
        const answer = (await ask(ctx, requests))?.answer;
        if (answer === undefined) return inputRequired({ inputRequests: requests });
        return text(`User response: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`);
    }, { inputSchema: z.object({ message: z.string() }) });
    // The 2025-11-25 suite's elicitation schemas (SEP-1034 defaults,
    // SEP-1330 enums), asked the way test_elicitation asks: one handler
    // for both eras.
    const elicitWith = (name, description, message, properties) =>
        tool(name, description, async (_args, ctx) => {
            const requests = { answer: inputRequired.elicit({ message, requestedSchema: { type: 'object', properties } }) };
            const answer = (await ask(ctx, requests))?.answer;
            if (answer === undefined) return inputRequired({ inputRequests: requests });
            return text(`Elicitation result: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`);
        });
    elicitWith('test_elicitation_sep1034_defaults', 'Asks with a default for every primitive (SEP-1034)', 'Test defaults for primitives', {
        name: { type: 'string', description: 'User name', default: 'John Doe' },
        age: { type: 'integer', description: 'User age', default: 30 },
        score: { type: 'number', description: 'User score', default: 95.5 },
        status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
        verified: { type: 'boolean', description: 'Verification status', default: true }
    });
    const titled = [
        { const: 'value1', title: 'First Option' },
        { const: 'value2', title: 'Second Option' },
        { const: 'value3', title: 'Third Option' }
    ];
    const options = ['option1', 'option2', 'option3'];
    elicitWith('test_elicitation_sep1330_enums', 'Asks with every enum form (SEP-1330)', 'Test enum schemas', {
        untitledSingle: { type: 'string', enum: options },
        titledSingle: { type: 'string', oneOf: titled },
        legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
        untitledMulti: { type: 'array', minItems: 1, maxItems: 3, items: { type: 'string', enum: options } },
        titledMulti: { type: 'array', minItems: 1, maxItems: 3, items: { type: 'string', anyOf: titled } }
    });
    tool('test_input_required_result_elicitation', 'Asks for a name in band', async (_args, ctx) => {
        const requests = { user_name: askString('What is your name?', 'name') };
        const name = acceptedContent(await ask(ctx, requests), 'user_name')?.name;
        if (typeof name !== 'string') return inputRequired({ inputRequests: requests });
        return text(`Hello, ${name}!`);
    });
    tool('test_input_required_result_sampling', 'Asks for a completion in band', async (_args, ctx) => {
        const requests = { capital_question: askModel('What is the capital of France?', 100) };
        const answer = (await ask(ctx, requests))?.capital_question;
        if (answer === undefined) return inputRequired({ inputRequests: requests });
        return text(`Sampling response: ${answer.content?.text ?? JSON.stringify(answer)}`);
    });
    tool('test_input_required_result_list_roots', 'Asks for the roots in band', async (_args, ctx) => {
        const requests = { client_roots: inputRequired.listRoots() };
        const roots = (await ask(ctx, requests))?.client_roots?.roots;
        if (!Array.isArray(roots)) return inputRequired({ inputRequests: requests });
        return text(`Client exposed ${roots.length} root(s): ${roots.map((r) => r.uri).join(', ')}`);
    });
    tool('test_input_required_result_request_state', 'Round-trips a sealed requestState', async (_args, ctx) => {
        const requests = { confirm: askConfirm() };
        if (legacy) {
            // A 2025 server keeps its state in the call it is serving.
            await ask(ctx, requests);
            return text('state-ok: confirmation received within the call');
        }
        if (acceptedContent(ctx.mcpReq.inputResponses, 'confirm') === undefined) {
            return inputRequired({
                inputRequests: requests,
                requestState: await stateCodec.mint({ tool: 'request_state', nonce: randomUUID() })
            });
        }
        if (ctx.mcpReq.requestState() === undefined) {
            throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'requestState missing or not verified');
        }
        return text('state-ok: requestState verified and confirmation received');
    });
    tool('test_input_required_result_multiple_inputs', 'Asks for a name, a completion and the roots at once', async (_args, ctx) => {
        const requests = {
            user_name: askString('What is your name?', 'name'),
            greeting: askModel('Generate a greeting', 50),
            client_roots: inputRequired.listRoots()
        };
        const responses = await ask(ctx, requests);
        const name = acceptedContent(responses, 'user_name')?.name;
        const greeting = responses?.greeting?.content?.text;
        const roots = responses?.client_roots?.roots;
        if (typeof name !== 'string' || typeof greeting !== 'string' || !Array.isArray(roots)) {
            return inputRequired({
                inputRequests: requests,
                requestState: await stateCodec.mint({ tool: 'multiple_inputs', nonce: randomUUID() })
            });
        }
        return text(`${greeting} ${name}: ${roots.length} root(s)`);
    });
    tool('test_input_required_result_multi_round', 'Two rounds of questions, the round kept in requestState', async (_args, ctx) => {
        const step1 = { step1: askString('Step 1: What is your name?', 'name') };
        const step2 = { step2: askString('Step 2: What is your favorite color?', 'color') };
        if (legacy) {
            const name = acceptedContent(await ask(ctx, step1), 'step1')?.name ?? 'unknown';
            const color = acceptedContent(await ask(ctx, step2), 'step2')?.color ?? 'unknown';
            return text(`Multi-round complete: ${name} likes ${color}`);
        }
        const state = ctx.mcpReq.requestState();
        const round = state?.tool === 'multi_round' && typeof state.round === 'number' ? state.round : 0;
        if (round === 0) {
            return inputRequired({
                inputRequests: step1,
                requestState: await stateCodec.mint({ tool: 'multi_round', round: 1, nonce: randomUUID() })
            });
        }
        if (round === 1) {
            const name = acceptedContent(ctx.mcpReq.inputResponses, 'step1')?.name ?? 'unknown';
            return inputRequired({
                inputRequests: step2,
                requestState: await stateCodec.mint({ tool: 'multi_round', round: 2, name, nonce: randomUUID() })
            });
        }
        const color = acceptedContent(ctx.mcpReq.inputResponses, 'step2')?.color ?? 'unknown';
        return text(`Multi-round complete: ${state.name} likes ${color}`);
    });
    tool('test_input_required_result_tampered_state', 'Refuses a requestState that fails verification', async (_args, ctx) => {
        const requests = { confirm: askConfirm() };
        if (legacy) {
            await ask(ctx, requests);
            return text('integrity-ok: confirmation received within the call');
        }
        if (ctx.mcpReq.requestState() !== undefined && acceptedContent(ctx.mcpReq.inputResponses, 'confirm') !== undefined) {
            return text('integrity-ok: requestState verified');
        }
        return inputRequired({
            inputRequests: requests,
            requestState: await stateCodec.mint({ tool: 'tampered_state', nonce: randomUUID() })
        });
    });
    tool('test_input_required_result_capabilities', 'Asks only for what the client declared', async (_args, ctx) => {
        if (ctx.mcpReq.inputResponses !== undefined) return text('Capability-aware input requests fulfilled');
        // A 2026 request declares its capabilities; a 2025 session did so
        // at initialize.
        const declared = ctx.mcpReq.envelope?.[CLIENT_CAPABILITIES_META_KEY] ?? server.server.getClientCapabilities() ?? {};
        const requests = {};
        if (declared.elicitation !== undefined) requests.user_name = askString('What is your name?', 'name');
        if (declared.sampling !== undefined) requests.greeting = askModel('Generate a short greeting', 50);
        if (declared.roots !== undefined) requests.client_roots = inputRequired.listRoots();
        if (Object.keys(requests).length === 0) return text('No declared capability allows an input request');
        if (legacy) {
            await ask(ctx, requests);
            return text('Capability-aware input requests fulfilled');
        }
        return inputRequired({ inputRequests: requests });
    });
}

// legacy is set in --stdio-2025 mode: the tools then behave as a 2025
// server's.
const legacy = process.argv[2] === '--stdio-2025';

// ask returns the client's answers to requests (input requests by key): in
// --stdio-2025 mode it sends them to the client on the session, all at
// once, and awaits the answers, as a 2025 server does; otherwise it returns
// the inputResponses of the request, if it is a retry that carries them.
async function ask(ctx, requests) {
    if (!legacy) return ctx.mcpReq.inputResponses;
    const keys = Object.keys(requests);
    const answers = await Promise.all(keys.map((key) => ctx.mcpReq.send(requests[key])));
    return Object.fromEntries(keys.map((key, i) => [key, answers[i]]));
}

function resources(server) {
    const fixed = (name, uri, mimeType, body) =>
        server.registerResource(name, uri, { description: `${name} for testing`, mimeType }, async () => ({
            contents: [{ uri, mimeType, ...body }]
        }));
    fixed('static-text', 'test://static-text', 'text/plain', { text: 'This is the content of the static text resource.' });
    fixed('static-binary', 'test://static-binary', 'image/png', { blob: PNG });
    fixed('watched-resource', 'test://watched-resource', 'text/plain', { text: 'Watched resource content' });
    server.registerResource(
        'template',
        new ResourceTemplate('test://template/{id}/data', { list: undefined }),
        { description: 'A template with one parameter', mimeType: 'application/json' },
        async (uri, { id }) => ({
            contents: [{ uri: uri.toString(), mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }]
        })
    );
}

function prompts(server, transient) {
    const user = (content) => ({ role: 'user', content });
    transient.prompt = server.registerPrompt(
        '__transient_prompt_for_list_changed',
        { description: 'Listed only while test_trigger_prompt_change has shown it' },
        async () => ({ messages: [user({ type: 'text', text: 'transient' })] })
    );
    if (!shown.prompt) transient.prompt.disable();
    server.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments' }, async () => ({
        messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })]
    }));
    server.registerPrompt(
        'test_prompt_with_arguments',
        { description: 'A prompt with two arguments', argsSchema: z.object({ arg1: z.string(), arg2: z.string() }) },
        async ({ arg1, arg2 }) => ({ messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` })] })
    );
    server.registerPrompt(
        'test_prompt_with_embedded_resource',
        { description: 'A prompt embedding a resource', argsSchema: z.object({ resourceUri: z.string() }) },
        async ({ resourceUri }) => ({
            messages: [
                user({ type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
                user({ type: 'text', text: 'Please process the embedded resource above.' })
            ]
        })
    );
    server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, async () => ({
        messages: [user({ type: 'image', data: PNG, mimeType: 'image/png' }), user({ type: 'text', text: 'Please analyze the image above.' })]
    }));
    server.registerPrompt('test_input_required_result_prompt', { description: 'A prompt that asks for context first' }, async (ctx) => {
        const requests = { user_context: askString('What context should the prompt use?', 'context') };
        const context = acceptedContent(await ask(ctx, requests), 'user_context')?.context;
        if (typeof context !== 'string') return inputRequired({ inputRequests: requests });
        return { messages: [user({ type: 'text', text: `Use the following context: ${context}` })] };
    });
}

function newServer() {
    const server = new McpServer(
        { name: 'mcpgate-everything-2026', version: '1.0.0' },
        {
            capabilities: {
                tools: { listChanged: true },
                resources: { subscribe: true, listChanged: true },
                prompts: { listChanged: true },
                logging: {},
                completions: {},
                extensions: { [TASKS_EXTENSION]: {} }
            },
            requestState: { verify: stateCodec.verify }
        }
    );
    const transient = {};
    tools(server, transient);
    registerTaskTools(server, (name, description, fn, extra) => server.registerTool(name, { description, ...extra }, fn));
    registerTaskMethods(server);
    resources(server);
    prompts(server, transient);
    server.server.setRequestHandler('completion/complete', async () => ({ completion: { values: [], total: 0, hasMore: false } }));
    server.server.setRequestHandler('resources/subscribe', async () => ({}));
    server.server.setRequestHandler('resources/unsubscribe', async () => ({}));
    server.server.setRequestHandler('logging/setLevel', async () => ({}));
    return server;
}

// toRequest turns a node request into the web Request the SDK entry takes.
// The request's signal aborts when the client goes away before the answer
// is written (closing the stream cancels the request in 2026-07-28).
function toRequest(req, res, base) {
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
        for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
    }
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    const ac = new AbortController();
    res.on('close', () => {
        if (!res.writableFinished) ac.abort();
    });
    return new Request(new URL(req.url, base), {
        method: req.method,
        headers,
        body: hasBody ? Readable.toWeb(req) : undefined,
        duplex: hasBody ? 'half' : undefined,
        signal: ac.signal
    });
}

// send writes a web Response to a node response, streaming its body.
async function send(response, res) {
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (!response.body) return res.end();
    const reader = response.body.getReader();
    res.on('close', () => reader.cancel().catch(() => {}));
    for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        res.write(value);
    }
    res.end();
}

function serveHTTP(hostPort) {
    const at = hostPort.lastIndexOf(':');
    const host = hostPort.slice(0, at);
    const port = Number(hostPort.slice(at + 1));
    handler = createMcpHandler(newServer, { onerror: (err) => console.error('everything-server-2026:', err) });
    const allowed = localhostAllowedHostnames();
    const base = `http://${hostPort}`;
    const server = http.createServer(async (req, res) => {
        try {
            if (new URL(req.url, base).pathname !== '/mcp') {
                res.writeHead(404).end();
                return;
            }
            const request = toRequest(req, res, base);
            // The trace context of the headers is the active one while the
            // request is served (see traced).
            const headers = tracer ? propagation.extract(ROOT_CONTEXT, req.headers) : ROOT_CONTEXT;
            await context.with(headers, async () => send(hostHeaderValidationResponse(request, allowed) ?? (await handler.fetch(request)), res));
        } catch (err) {
            console.error('everything-server-2026:', err);
            if (!res.headersSent) res.writeHead(500);
            res.end();
        }
    });
    server.listen(port, host, () => console.error(`everything-server-2026 serves http://${hostPort}/mcp`));
    server.on('error', (err) => {
        console.error(`everything-server-2026: ${err.message}`);
        process.exit(1);
    });
}

const args = process.argv.slice(2);
if (args[0] === '--stdio') {
    serveStdio(newServer, { onerror: (err) => console.error('everything-server-2026:', err) });
} else if (args[0] === '--stdio-2025') {
    // Connected by hand, an McpServer speaks only the 2025 era.
    await newServer().connect(new StdioServerTransport());
} else if (args[0] === '--http' && args[1]) {
    serveHTTP(args[1]);
} else {
    console.error('usage: everything-server-2026.mjs --stdio | --stdio-2025 | --http HOST:PORT');
    process.exit(2);
}
