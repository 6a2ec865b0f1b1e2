// tasks-2026 is the io.modelcontextprotocol/tasks extension (SEP-2663) of
// everything-server-2026, mcpgate's conformance fixture, written by hand on
// the TypeScript SDK v2, which carries the extension's wire but not a task
// store. It offers the tools the conformance suite's task scenarios call by
// name and the extension's methods: tasks/get (a DetailedTask, the result
// inlined once the task is over), tasks/update (input responses) and
// tasks/cancel. Tasks live in this process's memory, shared by every
// server instance, as the HTTP entry makes one per request.
import { randomUUID } from 'node:crypto';

import { CLIENT_CAPABILITIES_META_KEY, inputRequired, ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import * as z from 'zod/v4';

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

// MISSING_CAPABILITY is SEP-2575's Missing Required Client Capability.
const MISSING_CAPABILITY = -32021;
const TTL_MS = 60_000;
const POLL_MS = 100;

const tasks = new Map(); // taskId → task
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const now = () => new Date().toISOString();

// legacy is set in the fixture's --stdio-2025 mode: a 2025 server has no
// 2026 tasks, whatever a request's _meta claims.
const legacy = process.argv[2] === '--stdio-2025';

// declares reports whether the request's client declared the extension:
// per request in 2026-07-28's _meta, or for a 2025 session at initialize.
function declares(ctx, server) {
    if (legacy) return false;
    const caps = ctx.mcpReq.envelope?.[CLIENT_CAPABILITIES_META_KEY] ?? server.server.getClientCapabilities() ?? {};
    return caps.extensions?.[TASKS_EXTENSION] !== undefined;
}

function missingExtension(what) {
    return new ProtocolError(MISSING_CAPABILITY, `${what} needs the client capability extensions["${TASKS_EXTENSION}"]`, {
        requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } }
    });
}

// info is a task's Task fields, as CreateTaskResult and DetailedTask carry
// them.
function info(task) {
    const out = { taskId: task.taskId, status: task.status, createdAt: task.createdAt, lastUpdatedAt: task.lastUpdatedAt, ttlMs: TTL_MS, pollIntervalMs: POLL_MS };
    if (task.statusMessage) out.statusMessage = task.statusMessage;
    return out;
}

function setStatus(task, status, fields = {}) {
    if (['completed', 'failed', 'cancelled'].includes(task.status)) return false;
    Object.assign(task, fields, { status, lastUpdatedAt: now() });
    return true;
}

// create starts a task whose work is run(task), and returns its
// CreateTaskResult. The task is in the store before the result leaves.
function create(run) {
    const task = { taskId: randomUUID(), status: 'working', createdAt: now(), lastUpdatedAt: now(), inputRequests: {}, waiting: new Map() };
    tasks.set(task.taskId, task);
    setTimeout(() => tasks.delete(task.taskId), TTL_MS + 5_000).unref();
    Promise.resolve()
        .then(() => run(task))
        .then(
            (result) => setStatus(task, 'completed', { result }),
            (err) => setStatus(task, 'failed', { error: { code: err?.code ?? ProtocolErrorCode.InternalError, message: String(err?.message ?? err) } })
        );
    return { resultType: 'task', ...info(task) };
}

// ask parks the task in input_required with requests (by key) and returns
// the responses once tasks/update answered every one of them.
function ask(task, requests) {
    const answers = Object.keys(requests).map(
        (key) =>
            new Promise((resolve) => {
                task.inputRequests[key] = requests[key];
                task.waiting.set(key, resolve);
            })
    );
    setStatus(task, 'input_required');
    return Promise.all(answers).then((values) => {
        setStatus(task, 'working');
        return Object.fromEntries(Object.keys(requests).map((key, i) => [key, values[i]]));
    });
}

const sleep = (ms, task) =>
    new Promise((resolve) => {
        const timer = setTimeout(resolve, ms);
        task.cancel = () => {
            clearTimeout(timer);
            resolve();
        };
    });

const elicitConfirm = (message) =>
    inputRequired.elicit({ message, requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] } });

// registerTaskTools adds the tools of the task scenarios to server, with
// tool(name, description, handler, extra) as the fixture registers tools.
export function registerTaskTools(server, tool) {
    const noArgs = { inputSchema: z.object({}) };
    const optional = { ...noArgs, execution: { taskSupport: 'optional' } };
    const required = { ...noArgs, execution: { taskSupport: 'required' } };
    tool('greet', 'Greets synchronously (no task)', async (args) => text(`Hello, ${args.name}!`), {
        inputSchema: z.object({ name: z.string() })
    });
    tool(
        'slow_compute',
        'Sleeps for seconds, as a task when the client declared tasks',
        async (args, ctx) => {
            const work = async (task) => {
                await sleep(args.seconds * 1000, task ?? {});
                return text(`Computed ${args.label ?? 'result'} after ${args.seconds}s`);
            };
            if (!declares(ctx, server)) return work();
            return create(async (task) => {
                const result = await work(task);
                if (task.status === 'cancelled') return undefined;
                return result;
            });
        },
        { ...optional, inputSchema: z.object({ seconds: z.number(), label: z.string().optional() }) }
    );
    tool(
        'failing_job',
        'A task that ends with a tool error',
        async (_args, ctx) => {
            if (!declares(ctx, server)) throw missingExtension('failing_job');
            return create(async (task) => {
                await sleep(1000, task);
                return { isError: true, content: [{ type: 'text', text: 'The job failed' }] };
            });
        },
        required
    );
    tool(
        'protocol_error_job',
        'A task that fails with a protocol error',
        async (_args, ctx) => {
            if (!declares(ctx, server)) throw missingExtension('protocol_error_job');
            return create(async (task) => {
                await sleep(200, task);
                throw new ProtocolError(ProtocolErrorCode.InternalError, 'The job crashed');
            });
        },
        required
    );
    tool(
        'confirm_delete',
        'A task that asks for a confirmation, then deletes',
        async (args, ctx) => {
            if (!declares(ctx, server)) throw missingExtension('confirm_delete');
            return create(async (task) => {
                const { confirm } = await ask(task, { confirm: elicitConfirm(`Delete ${args.filename ?? 'the file'}?`) });
                return text(confirm?.action === 'accept' && confirm.content?.confirm ? 'Deleted' : 'Deletion cancelled');
            });
        },
        { ...optional, inputSchema: z.object({ filename: z.string().optional() }) }
    );
    tool(
        'multi_input',
        'A task that asks two questions at once',
        async (_args, ctx) => {
            if (!declares(ctx, server)) throw missingExtension('multi_input');
            return create(async (task) => {
                const answers = await ask(task, { first: elicitConfirm('First?'), second: elicitConfirm('Second?') });
                return text(`Answered: ${Object.keys(answers).join(', ')}`);
            });
        },
        optional
    );
    tool(
        'test_tool_with_task',
        'Asks for a name in band, then runs as a task',
        async (_args, ctx) => {
            if (!declares(ctx, server)) throw missingExtension('test_tool_with_task');
            const name = ctx.mcpReq.inputResponses?.user_name?.content?.name;
            if (typeof name !== 'string') {
                return inputRequired({
                    inputRequests: {
                        user_name: inputRequired.elicit({
                            message: 'What is your name?',
                            requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }
                        })
                    }
                });
            }
            return create(async (task) => {
                await sleep(200, task);
                return text(`Hello, ${name}, from a task`);
            });
        },
        required
    );
}

// find returns the task of a request's taskId, or refuses the request: the
// client must have declared the extension, and the task must exist.
function find(params, ctx, server, method) {
    if (!declares(ctx, server)) throw missingExtension(method);
    const task = tasks.get(params.taskId);
    if (!task) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `unknown taskId ${params.taskId}`);
    return task;
}

// requiredTools are the tools that run only as tasks.
const requiredTools = new Set(['failing_job', 'protocol_error_job', 'test_tool_with_task']);

// registerTaskMethods adds the extension's methods to server, and refuses
// a tools/call of a tool that runs only as a task from a client that did
// not declare the extension, with -32021 as SEP-2663 asks. (McpServer
// turns what a tool handler throws into a tool error result, so the
// check stands in front of its tools/call handler.)
export function registerTaskMethods(server) {
    const handlers = server.server._requestHandlers;
    const callTool = handlers.get('tools/call');
    handlers.set('tools/call', async (request, ctx) => {
        if (requiredTools.has(request.params?.name) && !declares(ctx, server)) throw missingExtension(request.params.name);
        return callTool(request, ctx);
    });
    const byId = { params: z.object({ taskId: z.string() }).passthrough() };
    server.server.setRequestHandler('tasks/get', byId, async (params, ctx) => {
        const task = find(params, ctx, server, 'tasks/get');
        const out = info(task);
        if (task.status === 'completed') out.result = task.result;
        if (task.status === 'failed') out.error = task.error;
        if (task.status === 'input_required') out.inputRequests = { ...task.inputRequests };
        return out;
    });
    server.server.setRequestHandler(
        'tasks/update',
        byId,
        async (params, ctx) => {
            const task = find(params, ctx, server, 'tasks/update');
            // The SDK takes inputResponses out of params, as for any request.
            const responses = ctx.mcpReq.inputResponses ?? params.inputResponses ?? {};
            for (const [key, response] of Object.entries(responses)) {
                const resolve = task.waiting.get(key);
                if (!resolve) continue;
                task.waiting.delete(key);
                delete task.inputRequests[key];
                resolve(response);
            }
            return {};
        }
    );
    server.server.setRequestHandler('tasks/cancel', byId, async (params, ctx) => {
        const task = find(params, ctx, server, 'tasks/cancel');
        if (setStatus(task, 'cancelled')) task.cancel?.();
        return {};
    });
}
