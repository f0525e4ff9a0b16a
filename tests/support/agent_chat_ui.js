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
//
// It asks "keep checking get_weather" (the loopback model then calls get_weather forever),
// checks no notice text is on screen when the loop question shows, types "continue" instead of
// clicking (the question comes back at once, the tool does not run again), rejects with a
// reason and waits for the final answer; one screenshot per step.
const { chromium } = require('playwright-core');
const dir = process.argv[2] || '.';
function check(ok, what) { if (!ok) throw new Error(`check failed: ${what}`); console.log(`ok: ${what}`); }
(async () => {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
  page.setDefaultTimeout(240000);
  await page.goto('http://127.0.0.1:3123/?apiUrl=http%3A%2F%2F127.0.0.1%3A2124&assistantId=langgraph-loop-chat', { timeout: 300000 });
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
  await browser.close();
})().catch(e => { console.error(e); process.exit(1); });
