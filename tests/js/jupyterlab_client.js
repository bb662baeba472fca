// JupyterLab's own client library (@jupyterlab/services, the code JupyterLab runs in the page)
// against a kpool serve, in Node: one scenario per run, its findings printed as JSON on stdout
// for the test that asked (tests/integration/test_jupyterlab_client.py checks them). A failure
// is an exception: its stack on stderr, exit status 1.
//
//   KPOOL_URL=http://127.0.0.1:PORT [KPOOL_TOKEN=T] node jupyterlab_client.js SCENARIO
//
// Scenarios: sessions, input, shell, debugger.
'use strict';
const WebSocket = require('ws');
const { ServerConnection, KernelManager, SessionManager } = require('@jupyterlab/services');

const settings = ServerConnection.makeSettings({
    baseUrl: process.env.KPOOL_URL,
    wsUrl: process.env.KPOOL_URL.replace(/^http/, 'ws'),
    token: process.env.KPOOL_TOKEN || '',
    appendToken: true, // the websocket's ?token=, as in a browser
    WebSocket,
});

function withTimeout(promise, ms, what) {
    let timer;
    return Promise.race([
        promise,
        new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms); }),
    ]).finally(() => clearTimeout(timer));
}

async function api(path, init = {}) {
    const r = await ServerConnection.makeRequest(settings.baseUrl.replace(/\/$/, '') + path, init, settings);
    return { status: r.status, body: r.status === 204 ? null : await r.json() };
}

// Runs `code`; the stdout text and the reply's status. `onStdin` answers input requests.
async function run(kernel, code, onStdin) {
    let stdout = '';
    const future = kernel.requestExecute({ code, allow_stdin: Boolean(onStdin), stop_on_error: true });
    future.onIOPub = (msg) => {
        if (msg.header.msg_type === 'stream') stdout += msg.content.text;
        if (msg.header.msg_type === 'execute_result') stdout += msg.content.data['text/plain'];
    };
    if (onStdin) future.onStdin = (msg) => onStdin(msg, future);
    const reply = await withTimeout(future.done, 60000, `execute ${JSON.stringify(code)}`);
    return { status: reply.content.status, stdout };
}

async function startSession(sessions, path) {
    return withTimeout(sessions.startNew({ path, name: path.split('/').pop(), type: 'notebook',
                                           kernel: { name: 'python3' } }), 60000, 'startNew');
}

const scenarios = {
    // A notebook opened, renamed, moved, given another kernel and closed: what JupyterLab's
    // SessionManager sends for each, and what the server says after each.
    async sessions() {
        const kernels = new KernelManager({ serverSettings: settings });
        const sessions = new SessionManager({ kernelManager: kernels, serverSettings: settings });
        await sessions.ready;
        const out = {};
        const session = await startSession(sessions, 'reports/q1.ipynb');
        out.created = session.model;
        out.cwd = (await run(session.kernel, 'import os; print(os.getcwd(), end="")')).stdout;
        out.again = (await api('/api/sessions', { method: 'POST', body: JSON.stringify({
            path: 'reports/q1.ipynb', type: 'notebook', kernel: { name: 'python3' } }) })).body;
        await sessions.refreshRunning();
        out.listed = Array.from(sessions.running()).map((m) => m.id);
        await session.setName('q1-final.ipynb');
        await session.setPath('archive/q1-final.ipynb');
        out.renamed = (await api(`/api/sessions/${session.id}`)).body;
        const before = session.kernel.id;
        await withTimeout(session.changeKernel({ name: 'python3' }), 60000, 'changeKernel');
        out.kernel_before = before;
        out.kernel_after = session.kernel.id;
        out.after_change = (await run(session.kernel, 'print(6 * 7, end="")')).stdout;
        out.kernels_after_change = (await api('/api/kernels')).body.map((k) => k.id);
        const id = session.id;
        await session.shutdown();
        out.get_after_shutdown = (await api(`/api/sessions/${id}`)).status;
        out.sessions_after_shutdown = (await api('/api/sessions')).body;
        out.kernels_after_shutdown = (await api('/api/kernels')).body.map((k) => k.id);
        sessions.dispose();
        kernels.dispose();
        return out;
    },

    // input() and getpass answered through the stdin channel, as the notebook's prompt box does.
    async input() {
        const kernels = new KernelManager({ serverSettings: settings });
        const kernel = await withTimeout(kernels.startNew({ name: 'python3' }), 60000, 'startNew');
        const prompts = [];
        const answer = (msg, future) => {
            prompts.push({ prompt: msg.content.prompt, password: msg.content.password });
            future.sendInputReply({ status: 'ok', value: msg.content.password ? 's3cret' : 'kpool' }, msg.header);
        };
        const out = {};
        out.input = await run(kernel, 'name = input("name? ")\nprint("hello", name)', answer);
        out.getpass = await run(kernel, 'import getpass\nprint(len(getpass.getpass("pw? ")))', answer);
        out.prompts = prompts;
        await kernel.shutdown();
        kernels.dispose();
        return out;
    },

    // The rest of what a notebook's editor sends on the shell channel as the user types.
    async shell() {
        const kernels = new KernelManager({ serverSettings: settings });
        const kernel = await withTimeout(kernels.startNew({ name: 'python3' }), 60000, 'startNew');
        await run(kernel, 'import os\nalpha_beta = 1');
        const out = {};
        const code = 'alpha_b';
        out.complete = (await kernel.requestComplete({ code, cursor_pos: code.length })).content;
        out.inspect = (await kernel.requestInspect({ code: 'len', cursor_pos: 3, detail_level: 0 })).content;
        // This kernel's own session's inputs (a tail would list the user's earlier kernels' too,
        // from IPython's history file, as any Jupyter server's kernels do).
        out.history = (await kernel.requestHistory({ output: false, raw: true, hist_access_type: 'range',
                                                     session: 0, start: 1, stop: 100 })).content;
        out.session_number = (await run(kernel, 'print(get_ipython().history_manager.session_number, end="")')).stdout;
        out.incomplete = (await kernel.requestIsComplete({ code: 'for i in range(3):' })).content;
        out.complete_code = (await kernel.requestIsComplete({ code: 'x = 1' })).content;
        out.comm_info = (await kernel.requestCommInfo({})).content;
        out.info = (await kernel.requestKernelInfo()).content;
        out.spec = (await api('/api/kernelspecs/python3')).body;
        await kernel.shutdown();
        kernels.dispose();
        return out;
    },

    // JupyterLab's debugger: initialize, attach, a breakpoint in a cell, the stop it makes, the
    // stack there, continue, and the cell's result.
    async debugger() {
        const kernels = new KernelManager({ serverSettings: settings });
        const kernel = await withTimeout(kernels.startNew({ name: 'python3' }), 60000, 'startNew');
        const events = [];
        let stopped;
        const stop = new Promise((resolve) => { stopped = resolve; });
        kernel.anyMessage.connect((_, { msg, direction }) => {
            if (direction === 'recv' && msg.header.msg_type === 'debug_event') {
                events.push(msg.content.event);
                if (msg.content.event === 'stopped') stopped(msg.content.body);
            }
        });
        let seq = 0;
        const debug = async (command, args = {}) => {
            seq += 1;
            const future = kernel.requestDebug({ type: 'request', seq, command, arguments: args });
            const reply = await withTimeout(future.done, 30000, `debug ${command}`);
            return reply.content;
        };
        const out = {};
        out.initialize = await debug('initialize', {
            clientID: 'jupyterlab', clientName: 'JupyterLab', adapterID: 'python', pathFormat: 'path',
            linesStartAt1: true, columnsStartAt1: true, supportsVariableType: true,
            supportsVariablePaging: true, supportsRunInTerminalRequest: true, locale: 'en-us' });
        out.attach = await debug('attach');
        out.debug_info = await debug('debugInfo');
        const code = 'def f(x):\n    y = x + 1\n    return y\nf(41)\n';
        const cell = await debug('dumpCell', { code });
        const path = cell.body.sourcePath;
        out.breakpoints = await debug('setBreakpoints', { source: { path }, breakpoints: [{ line: 2 }],
                                                        sourceModified: false });
        await debug('configurationDone');
        const executing = run(kernel, code);
        const where = await withTimeout(stop, 30000, 'the breakpoint');
        out.stopped = where;
        out.stack = await debug('stackTrace', { threadId: where.threadId });
        out.continue = await debug('continue', { threadId: where.threadId });
        out.result = await executing;
        out.disconnect = await debug('disconnect', { restart: false, terminateDebuggee: false });
        out.events = events;
        await kernel.shutdown();
        kernels.dispose();
        return out;
    },
};

async function main() {
    const name = process.argv[2];
    if (!scenarios[name]) throw new Error(`unknown scenario ${name} (one of ${Object.keys(scenarios).join(', ')})`);
    const report = await scenarios[name]();
    process.stdout.write(JSON.stringify(report) + '\n');
}

main().then(() => process.exit(0), (e) => {
    process.stderr.write(`${e.stack || e}\n`);
    process.exit(1);
});
