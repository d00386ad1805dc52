package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// playwrightVersion is the pinned playwright-core npm package that drives
// Debian's chromium (playwright-core downloads no browser).
const playwrightVersion = "1.65.2"

// dashboardScript logs in to the router's /dashboard with the cluster
// token, then samples: it refreshes the page's data, reads the live room
// count the page shows, and fetches /debug/rooms at once; it waits until
// the page lists the killed worker as down, takes the screenshot, and
// prints one JSON document. It records every request URL, to check that
// the token never appears in one.
const dashboardScript = `
const { chromium } = require("playwright-core");
(async () => {
  const [base, token, shot, killed] = process.argv.slice(2);
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const urls = [];
  page.on("request", (r) => urls.push(r.url()));
  await page.goto(base + "/dashboard");
  await page.waitForSelector("#token", { state: "visible" });
  await page.fill("#token", token);
  await Promise.all([page.waitForURL(base + "/dashboard"), page.click("#login-button")]);
  await page.waitForSelector("#app", { state: "visible" });
  // The killed worker shows as down.
  await page.waitForFunction((w) => [...document.querySelectorAll("#workers tbody tr")].some(
    (tr) => tr.textContent.includes(w) && tr.textContent.includes("down")), killed.replace(/^https?:\/\//, ""), { timeout: 60000 });
  const samples = await page.evaluate(async () => {
    const out = [];
    for (let i = 0; i < 40; i++) {
      const d = await window.tandemDashboard.refresh();
      const shown = Number(document.getElementById("live-count").textContent);
      const doc = await (await fetch("/debug/rooms", { credentials: "same-origin" })).json();
      out.push({ shown: shown, data: d.live, debug: doc.live, rows: document.querySelectorAll("#rooms tbody tr td a").length });
      await new Promise((r) => setTimeout(r, 100));
    }
    return out;
  });
  await page.waitForTimeout(1200); // one more live update before the picture
  await page.screenshot({ path: shot, fullPage: true });
  const workers = await page.$$eval("#workers tbody tr", (trs) => trs.map((tr) => tr.textContent));
  const histText = await page.$eval("#ttft-sum", (e) => e.textContent);
  console.log(JSON.stringify({ samples, urls, workers, histText, url: page.url() }));
  await browser.close();
})().catch((e) => { console.error(e); process.exit(1); });
`

// TestDashboardInBrowser: headless Chromium (Debian's chromium, driven by
// playwright-core) logs in to the router's /dashboard of a cluster under
// load with a decode worker killed: the page lists the dead worker as down,
// the live room count it shows is /debug/rooms' fetched at the same moment,
// the token appears in no URL, and it takes a screenshot (docs/dashboard.png with TANDEM_DASHBOARD_SHOT=1).
func TestDashboardInBrowser(t *testing.T) {
	setup(t)
	skipShort(t)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (Debian: apt-get install chromium); .ci/run installs it")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the dashboard's browser test drives chromium with playwright-core; .ci/run installs it")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the dashboard's browser test installs playwright-core; .ci/run installs it")
	}
	modules := installNodePackages(t, npm, "playwright-core-"+playwrightVersion,
		[]nodePackage{{"playwright-core", playwrightVersion}}, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	var out lockedBuffer
	cl := observedCluster(t, &out, 4)
	victim := procURL(t, cl, "decode-1")
	if err := cl.Kill("decode-1"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "dashboard.cjs")
	if err := os.WriteFile(script, []byte(dashboardScript), 0o644); err != nil {
		t.Fatal(err)
	}
	// The screenshot goes to a temporary folder; TANDEM_DASHBOARD_SHOT=1
	// writes docs/dashboard.png instead (a test run leaves the tree as it was).
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if os.Getenv("TANDEM_DASHBOARD_SHOT") == "1" {
		shot = filepath.Join(repoRoot(t), "docs", "dashboard.png")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, cl.RouterURL(), e2eClusterToken, shot, victim)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "CHROMIUM="+chromium)
	stdout, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("the browser script failed: %v\n%s\n%s", err, stdout, stderr)
	}
	var res struct {
		Samples []struct{ Shown, Data, Debug, Rows int } `json:"samples"`
		URLs    []string                                 `json:"urls"`
		Workers []string                                 `json:"workers"`
		Hist    string                                   `json:"histText"`
	}
	if err := json.Unmarshal(stdout, &res); err != nil {
		t.Fatalf("the browser script printed %s: %v", stdout, err)
	}
	equal, busy := 0, 0
	for _, s := range res.Samples {
		if s.Shown != s.Data {
			t.Errorf("the page shows %d live rooms but its data said %d", s.Shown, s.Data)
		}
		if s.Shown == s.Debug {
			equal++
			if s.Shown > 0 {
				busy++
			}
		}
	}
	t.Logf("%d of %d samples: the page's live room count equals /debug/rooms fetched right after it (%d of them with rooms live); samples %+v",
		equal, len(res.Samples), busy, res.Samples)
	if busy == 0 {
		t.Errorf("no sample where the page's live room count, with rooms live, equals /debug/rooms: %+v", res.Samples)
	}
	for _, u := range res.URLs {
		if strings.Contains(u, e2eClusterToken) {
			t.Errorf("the token is in a URL the page requested: %s", u)
		}
	}
	if !strings.Contains(res.Hist, "samples") {
		t.Errorf("the TTFT distribution shows %q, want its sample count", res.Hist)
	}
	t.Logf("workers as the page lists them: %s", strings.Join(res.Workers, " | "))
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10000 {
		t.Errorf("screenshot %s: %v", shot, err)
	}
}
