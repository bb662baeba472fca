// Opens one page in Debian's chromium (headless, through playwright-core), waits until the page
// sets `window.kpoolDone`, and prints the page's `window.kpoolReport` as JSON on stdout. For
// the browser tests in tests/integration (test_front_door.py): the page is what a hostile site
// would serve; what it did is checked on the server's side.
//
//   node visit_page.js --url URL [--map HOST=IP] [--fulfill URL=FILE] [--timeout MS]
//                      [--without-local-network-checks]
//
// --map: chromium resolves HOST to IP (--host-resolver-rules), as a DNS-rebinding attacker's
// name would resolve; --fulfill: URL is answered with FILE's HTML without any server (the
// attacker's own server, before the name rebinds to 127.0.0.1); --without-local-network-checks:
// chromium as Firefox and Safari are, and chromium before 142 was, without its Local Network
// Access checks (a public page's requests to a loopback address need the user's permission),
// so that what kpool serve itself refuses is what is tested.
'use strict';
const fs = require('fs');
const { chromium } = require('playwright-core');

function parse(argv) {
    const args = { map: [], fulfill: [], timeout: 30000, localChecks: true };
    for (let i = 2; i < argv.length; i += 2) {
        const [flag, value] = [argv[i], argv[i + 1]];
        if (flag === '--without-local-network-checks') {
            args.localChecks = false;
            i -= 1;
            continue;
        }
        if (value === undefined) throw new Error(`${flag} needs a value`);
        if (flag === '--url') args.url = value;
        else if (flag === '--map') args.map.push(value.split('='));
        else if (flag === '--fulfill') args.fulfill.push([value.slice(0, value.lastIndexOf('=')), value.slice(value.lastIndexOf('=') + 1)]);
        else if (flag === '--timeout') args.timeout = Number(value);
        else throw new Error(`unknown option ${flag}`);
    }
    if (!args.url) throw new Error('--url is required');
    return args;
}

async function main() {
    const args = parse(process.argv);
    const flags = ['--no-sandbox', '--disable-gpu', '--no-first-run'];
    if (!args.localChecks) {
        flags.push('--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests,' +
                   'PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults');
    }
    if (args.map.length) flags.push('--host-resolver-rules=' + args.map.map(([h, ip]) => `MAP ${h} ${ip}`).join(', '));
    const browser = await chromium.launch({ executablePath: process.env.KPOOL_CHROMIUM || '/usr/bin/chromium',
                                            headless: true, args: flags });
    try {
        const page = await browser.newPage();
        const console_lines = [];
        page.on('console', (m) => console_lines.push(m.text()));
        for (const [url, file] of args.fulfill) {
            const html = fs.readFileSync(file, 'utf8');
            await page.route(url, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: html }));
        }
        await page.goto(args.url);
        await page.waitForFunction(() => window.kpoolDone === true, null, { timeout: args.timeout });
        const report = await page.evaluate(() => window.kpoolReport);
        process.stdout.write(JSON.stringify({ report, console: console_lines }) + '\n');
    } finally {
        await browser.close();
    }
}

main().catch((e) => {
    process.stderr.write(String(e && e.stack || e) + '\n');
    process.exit(1);
});
