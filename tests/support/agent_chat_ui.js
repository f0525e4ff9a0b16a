// The opt-in real-browser check of Agent Chat UI against `langgraph dev` (not run in CI).
//
// Set up (outside this repository; never commit Agent Chat UI's code):
//   apt-get install chromium; npm install playwright-core (in a scratch folder)
//   a copy of github.com/langchain-ai/agent-chat-ui, `npm install` there
//   python -m tests.support.openai_server --port 18431           (the loopback model)
//   OPENAI_API_KEY=test OPENAI_BASE_URL=http://127.0.0.1:18431/v1 LANGGRAPH_LOOP_MODEL=m \
//     langgraph dev --no-browser --host 127.0.0.1 --port 2124     (in this repository)
//   NEXT_PUBLIC_API_URL=http://127.0.0.1:2124 NEXT_PUBLIC_ASSISTANT_ID=langgraph-loop-chat \
//     npx next dev -H 127.0.0.1 -p 3123                            (in the UI's copy)
// Run: NODE_PATH=<scratch>/node_modules node tests/support/agent_chat_ui.js <folder for screenshots>
// (UI_URL and API_URL override the two addresses above.)
//
// The loop question: it asks "keep checking get_weather" (the loopback model then calls
// get_weather forever), checks no notice text is on screen when the loop question shows, types
// "continue" instead of clicking (the question comes back at once, the tool does not run
// again), rejects with a reason and waits for the final answer.
// The budget check-in: it makes an assistant of the chat graph whose conversation budget is 380
// tokens (POST /assistants with a context; the UI then names it by its UUID), asks two
// questions in one chat: the second meets the check-in panel (Approve with the tokens field,
// Reject with a reason); approving goes on to the answer. In a second chat, rejecting ends
// with an answer, no notice on screen. One screenshot per step.
const { chromium } = require('playwright-core');
const dir = process.argv[2] || '.';
const ui = process.env.UI_URL || 'http://127.0.0.1:3123';
const api = process.env.API_URL || 'http://127.0.0.1:2124';
const NOTICE = /Loop warning|has been stopped|They said|Summarize|Continue working|Summary of the earlier/;
function check(ok, what) { if (!ok) throw new Error(`check failed: ${what}`); console.log(`ok: ${what}`); }
(async () => {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
  page.setDefaultTimeout(240000);
  const open = (assistant) => page.goto(`${ui}/?apiUrl=${encodeURIComponent(api)}&assistantId=${assistant}`, { timeout: 300000 });
  await open('langgraph-loop-chat');
  const box = page.getByPlaceholder('Type your message...');
  await box.fill('keep checking get_weather for Paris');
  await box.press('Enter');
  await page.getByText('Loop detected: get_weather').first().waitFor();
  await page.waitForTimeout(2000);
  const b1 = await page.locator('body').innerText();
  check(!/Loop warning|has been stopped|Summarize/.test(b1), 'no notice text on screen at the loop question');
  await page.getByRole('button', { name: 'Description' }).click().catch(() => console.log('no description button'));
  await page.waitForTimeout(1500);
  await page.screenshot({ path: dir + '/1-loop-question.png', fullPage: true });
  const tools1 = (b1.match(/Tool Result: get_weather/g) || []).length;
  await box.fill('continue');
  await box.press('Enter');
  await page.waitForTimeout(10000);
  await page.getByText('Loop detected: get_weather').first().waitFor();
  const b2 = await page.locator('body').innerText();
  check((b2.match(/Tool Result: get_weather/g) || []).length === tools1, 'typing: the tool did not run again');
  check(b2.includes('\ncontinue\n') && !b2.includes('Successfully handled'), 'typing: the message shows, no placeholder');
  await page.screenshot({ path: dir + '/2-typed-continue-asked-again.png', fullPage: true });
  await page.getByPlaceholder('Share feedback with the agent...').fill('It will not change today; stop.');
  await page.getByRole('button', { name: 'Submit rejection' }).click();
  await page.getByText('Done.').first().waitFor();
  await page.waitForTimeout(2000);
  const b3 = await page.locator('body').innerText();
  check(!/Loop warning|has been stopped|They said/.test(b3) && b3.includes('Done.'), 'reject: a final answer, no notice text');
  await page.screenshot({ path: dir + '/3-rejected-final-answer.png', fullPage: true });

  const made = await fetch(`${api}/assistants`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ graph_id: 'langgraph-loop-chat', name: 'small budget', context: { limits: { token_budget: 380 } } }) });
  const { assistant_id } = await made.json();
  const answers = (n) => page.waitForFunction((k) => (document.body.innerText.match(/^Done\.$/gm) || []).length >= k, n);
  const twoQuestions = async () => {
    await open(assistant_id);
    await box.fill('get_weather for Paris');
    await box.press('Enter');
    await answers(1);
    await box.fill('and get_weather for Rome');
    await box.press('Enter');
    await page.getByText('Token budget reached: add more?').first().waitFor();
    await page.waitForTimeout(2000);
  };
  await twoQuestions();
  const b4 = await page.locator('body').innerText();
  check(await page.getByRole('button', { name: 'Approve', exact: true }).isVisible(), 'check-in: an Approve button');
  check(await page.getByRole('button', { name: 'Submit rejection' }).isVisible(), 'check-in: a Reject card');
  check((await page.$$eval('textarea', (els) => els.map((e) => e.value))).includes('1000'), 'check-in: the tokens field holds 1000');
  check(!NOTICE.test(b4), 'check-in: no notice text on screen');
  await page.screenshot({ path: dir + '/4-budget-check-in.png', fullPage: true });
  await page.getByRole('button', { name: 'Description' }).click();
  await page.waitForTimeout(1500);
  check(/This conversation has used \d+ of its 380-token budget/.test(await page.locator('body').innerText()),
    'check-in: the description says what was used and what each button does');
  await page.screenshot({ path: dir + '/5-budget-check-in-description.png', fullPage: true });
  await page.locator('button:has(svg.lucide-x)').first().click();
  await page.waitForTimeout(1000);
  await page.getByRole('button', { name: 'Approve', exact: true }).click();
  await answers(2);
  await page.waitForTimeout(2000);
  const b5 = await page.locator('body').innerText();
  check(!b5.includes('Token budget reached') && !NOTICE.test(b5), 'approve: the run went on to its answer, no panel, no notice');
  await page.screenshot({ path: dir + '/6-budget-approved-answer.png', fullPage: true });

  await twoQuestions();
  await page.getByPlaceholder('Share feedback with the agent...').fill('That is enough for today.');
  await page.getByRole('button', { name: 'Submit rejection' }).click();
  await answers(2);
  await page.waitForTimeout(2000);
  const b6 = await page.locator('body').innerText();
  check(!b6.includes('Token budget reached') && !NOTICE.test(b6), 'reject: a final answer, no panel, no notice');
  await page.screenshot({ path: dir + '/7-budget-rejected-answer.png', fullPage: true });
  await browser.close();
})().catch(e => { console.error(e); process.exit(1); });
