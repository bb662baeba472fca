// A person's path through classic Notebook 6.4 in Debian's chromium (headless, playwright-core):
// open a notebook, type a cell and run it with Shift+Enter, answer an input() prompt in the
// page, interrupt a running cell from the toolbar, restart the kernel from the toolbar (and
// confirm), and run a cell after it. Each step waits for what the person would see on the page.
// Prints {steps: {name: text seen}} as JSON on stdout; on a failure, the page's screenshot goes
// to --screenshot and the error (with the steps done) to stderr, exit status 1.
//
//   node notebook_page.js --url http://127.0.0.1:PORT/notebooks/NAME.ipynb?token=T
//                         --screenshot FILE [--timeout MS]
'use strict';
const { chromium } = require('playwright-core');

function parse(argv) {
    const args = { timeout: 60000 };
    for (let i = 2; i < argv.length; i += 2) {
        const [flag, value] = [argv[i], argv[i + 1]];
        if (value === undefined) throw new Error(`${flag} needs a value`);
        if (flag === '--url') args.url = value;
        else if (flag === '--screenshot') args.screenshot = value;
        else if (flag === '--timeout') args.timeout = Number(value);
        else throw new Error(`unknown option ${flag}`);
    }
    if (!args.url || !args.screenshot) throw new Error('--url and --screenshot are required');
    return args;
}

// The output area of the last code cell that has one, as text.
async function lastOutput(page) {
    return page.evaluate(() => {
        const areas = Array.from(document.querySelectorAll('.cell.code_cell .output_subarea'));
        return areas.length ? areas[areas.length - 1].innerText : '';
    });
}

async function main() {
    const args = parse(process.argv);
    const browser = await chromium.launch({ executablePath: process.env.KPOOL_CHROMIUM || '/usr/bin/chromium',
                                            headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
    const steps = {};
    const page = await browser.newPage();
    page.setDefaultTimeout(args.timeout);
    const console_lines = [];
    page.on('console', (m) => console_lines.push(m.text()));
    const kernelIdle = () => page.waitForSelector('#kernel_indicator_icon.kernel_idle_icon');
    // Types `code` into a new cell at the end, as a person does, and runs it with Shift+Enter.
    const runCell = async (code) => {
        await page.evaluate(() => {
            const nb = window.Jupyter.notebook;
            nb.select(nb.ncells() - 1);
            if (nb.get_selected_cell().get_text() !== '') nb.insert_cell_below('code');
            nb.select(nb.ncells() - 1);
            nb.edit_mode();
        });
        await page.keyboard.type(code);
        await page.keyboard.press('Shift+Enter');
    };
    const seeOutput = async (name, pattern) => {
        await page.waitForFunction(
            (re) => {
                const areas = Array.from(document.querySelectorAll('.cell.code_cell .output_subarea'));
                return areas.length && new RegExp(re).test(areas[areas.length - 1].innerText);
            }, pattern.source);
        steps[name] = await lastOutput(page);
    };
    try {
        await page.goto(args.url);
        await page.waitForFunction(() => window.Jupyter && window.Jupyter.notebook && window.Jupyter.notebook.kernel);
        await kernelIdle();
        steps.opened = await page.title();

        await runCell('x = 6 * 7\nprint("answer", x)');
        await seeOutput('run', /answer 42/);

        await runCell('name = input("name? ")\nprint("hello", name)');
        const prompt = await page.waitForSelector('.raw_input_container input.raw_input');
        steps.prompt = await page.evaluate(() => document.querySelector('.raw_input_prompt').innerText);
        await prompt.type('kpool');
        await prompt.press('Enter');
        await seeOutput('input', /hello kpool/);

        await runCell('import time\nprint("sleeping", flush=True)\ntime.sleep(60)');
        await seeOutput('running', /sleeping/);
        await page.click('button[data-jupyter-action="jupyter-notebook:interrupt-kernel"]');
        await seeOutput('interrupted', /KeyboardInterrupt/);
        await kernelIdle();

        await page.click('button[data-jupyter-action="jupyter-notebook:confirm-restart-kernel"]');
        await page.click('.modal-dialog button.btn-danger'); // "Restart"
        await page.waitForSelector('.modal-dialog', { state: 'detached' });
        await page.waitForFunction(() => /restarted/i.test(document.querySelector('#notification_kernel').innerText) ||
                                         document.querySelector('#kernel_indicator_icon.kernel_idle_icon'));
        await kernelIdle();
        await runCell('print("x" in dir())');
        await seeOutput('after_restart', /^(True|False)\s*$/);
        process.stdout.write(JSON.stringify({ steps, console: console_lines }) + '\n');
    } catch (e) {
        await page.screenshot({ path: args.screenshot, fullPage: true }).catch(() => {});
        process.stderr.write(`${e.stack || e}\nsteps done: ${JSON.stringify(steps)}\nscreenshot: ${args.screenshot}\n` +
                             `console:\n${console_lines.join('\n')}\n`);
        process.exitCode = 1;
    } finally {
        await browser.close();
    }
}

main().catch((e) => {
    process.stderr.write(String(e && e.stack || e) + '\n');
    process.exit(1);
});
