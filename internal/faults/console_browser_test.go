package faults_test

// The web console in a real browser (headless Chromium, driven with chromedp), against a
// real worker process and the local stack. It lives beside the fault tests for their rig:
// a cluster under an alias of its own, worker processes, and the leftover checks.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// ScreenshotsEnv names the folder the browser test writes the console's screenshots to
// (go tool task screenshots: docs/screenshots); unset, a folder of the test's.
const ScreenshotsEnv = "KAFKAMENDER_SCREENSHOTS"

// chromium finds the browser: Debian's chromium, which .ci/run installs.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium: the console's browser tests need it (Debian: apt-get install chromium; .ci/run installs it)")
	return ""
}

// browser is one headless Chromium tab on the console.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string // http://host:port
	shots string
}

func newBrowser(t *testing.T, base, shots string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: base, shots: shots}
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil { // starts the browser: no timeout
		t.Fatalf("start Chromium: %v", err)
	}
	return b
}

// do runs steps, within a minute.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %s: %v\n--- the page (%s) ---\n%.3000s", what, err, b.text("title"), b.text("body"))
	}
}

// in is b for the (sub)test t: its failures end t.
func (b *browser) in(t *testing.T) *browser {
	c := *b
	c.t = t
	return &c
}

// eval evaluates a JavaScript expression in the page, within 10 seconds.
func eval[T any](b *browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// text is the text of the first element sel matches, "" when none does.
func (b *browser) text(sel string) string {
	s, _ := eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel))
	return s
}

// attr is an attribute of the first element sel matches, "" when none does.
func (b *browser) attr(sel, name string) string {
	s, _ := eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {getAttribute: () => ""}).getAttribute(%q) || ""`, sel, name))
	return s
}

// count is how many elements sel matches.
func (b *browser) count(sel string) int {
	b.t.Helper()
	var n int
	testenv.Eventually(b.t, 10*time.Second, func() error { // again if the page was reloading
		var err error
		n, err = eval[int](b, fmt.Sprintf("document.querySelectorAll(%q).length", sel))
		return err
	})
	return n
}

// open loads a console page. A page that reloads itself (an event page when its result
// comes) aborts a navigation under way: it is tried again.
func (b *browser) open(path string) {
	b.t.Helper()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		err := chromedp.Do(ctx, chromedp.Navigate(b.base+path), chromedp.WaitReady(chromedp.CSS("body")))
		cancel()
		if err == nil {
			return
		}
		if i == 4 || !reloaded(err) {
			b.t.Fatalf("browser: open %s: %v", path, err)
		}
	}
}

// click clicks sel, then waits until next is visible (on the page it leads to). The
// clusters page reloads itself when the state it shows changes: an element found just
// before is then gone, and the click is tried again on the new page.
func (b *browser) click(sel, next string) {
	b.t.Helper()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS(next)))
		cancel()
		if err == nil {
			return
		}
		if i == 4 || !reloaded(err) {
			b.t.Fatalf("browser: click %s: %v\n--- the page (%s) ---\n%.3000s", sel, err, b.text("title"), b.text("body"))
		}
	}
}

// reloaded reports whether err says the page was replaced under the action: the node
// or the script context it used is gone.
func reloaded(err error) bool {
	for _, s := range []string{"Could not find node", "No node with given id", "Node is detached", "Execution context was destroyed",
		"Cannot find context with specified id", "ERR_ABORTED"} {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}

// waitText waits until the element sel has text containing want (reloading the page
// first when reload is set: for pages the test expects to change without a push).
func (b *browser) waitText(sel, want string, timeout time.Duration, reload bool) {
	b.t.Helper()
	testenv.Eventually(b.t, timeout, func() error {
		if reload {
			ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
			defer cancel()
			_ = chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitReady(chromedp.CSS("body")))
		}
		if got := b.text(sel); !strings.Contains(got, want) {
			return fmt.Errorf("%s: %q, want %q", sel, got, want)
		}
		return nil
	})
}

// screenshot saves the page as name.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	var png []byte
	for i := 0; ; i++ { // again if the page was reloading itself
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		var err error
		png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err == nil && len(png) >= 1000 {
			break
		}
		if i == 4 || err == nil || !reloaded(err) {
			b.t.Fatalf("screenshot %s: %d bytes, %v", name, len(png), err)
		}
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// signIn signs in on the login page with tok.
func (b *browser) signIn(tok string) {
	b.t.Helper()
	b.open("/ui/login")
	b.do("type the token", chromedp.SendKeys(chromedp.CSS("#token"), tok))
	b.click("#sign-in", "#role")
}

// TestConsoleInABrowser drives the console as the people on call would, against a real
// worker on the KRaft cluster: a cluster paused and resumed with the buttons; a
// replication-factor raise over the approval threshold that appears as a plan, is
// approved with the button, shows live progress that advances while it copies, and whose
// result appears in the audit trail; a running copy cancelled with the button; a viewer
// who sees no button and whose forged action is refused. Nothing is left behind. The
// pages are photographed on the way (go tool task screenshots keeps the photos).
func TestConsoleInABrowser(t *testing.T) {
	env := testenv.GetExclusive(t)
	env.LockBrokerThrottles(t)
	sec, err := env.Stack.Secrets()
	if err != nil {
		t.Fatal(err)
	}
	shots := os.Getenv(ScreenshotsEnv)
	if shots == "" {
		shots = t.TempDir()
	}
	r := newRig(t, env, "kraft")
	addr := testenv.FreeAddr(t)
	r.extra = fmt.Sprintf(`console:
  enabled: true
  listen: %s
  operator_token_file: %s
  viewer_token_file: %s
approval:
  approvers: ["*"]
  expiry: 10m
  rules:
    - types: [replica-change-requested]
      require: above
      partitions: 1
`, addr, sec.File(stack.FileConsoleOperatorToken), sec.File(stack.FileConsoleViewerToken))
	w := r.start("a")
	defer w.stop()
	b := newBrowser(t, "http://"+addr, shots)

	// Unauthenticated: the login page, with 401.
	resp, err := http.Get("http://" + addr + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /ui/ without a credential: %d, want 401", resp.StatusCode)
	}
	b.signIn(sec.ConsoleOperatorToken)
	card := "#cluster-" + r.alias

	t.Run("pause and resume", func(t *testing.T) {
		b := b.in(t)
		b.open("/ui/")
		b.do("give a reason", chromedp.SendKeys(chromedp.CSS("#pause-reason-"+r.alias), "console test: maintenance"))
		b.click("#pause-"+r.alias, "#event-status")
		b.waitText("#event-status", "succeeded", time.Minute, false) // the page reloads when the result comes
		b.open("/ui/")
		b.waitText(card+" h2", "paused", 30*time.Second, true)
		// (the page reloads itself when the state it shows changes: read until it shows it)
		b.waitText(card, "console test: maintenance", 10*time.Second, false)
		b.waitText(card, "by console/operator-token", 10*time.Second, false)
		b.click("#resume-"+r.alias, "#event-status")
		b.waitText("#event-status", "succeeded", time.Minute, false)
		b.open("/ui/")
		b.waitText(card+" h2", "running", 30*time.Second, true)
	})

	t.Run("approve a plan and watch it copy", func(t *testing.T) {
		b := b.in(t)
		topic := r.topic("ui", [][]int32{{1, 2}, {2, 3}}, 5_000_000, nil)
		before := r.partitions(topic)
		id, ch := r.publish(events.TypeReplicaChangeRequested, map[string]any{"topic": topic, "replication_factor": 3,
			"throttle_bytes_per_sec": throttleRate})
		b.open("/ui/plans")
		b.waitText("#plans-awaiting", id, time.Minute, true)
		b.click("#plans-awaiting a.plan-link", "#plan-state")
		b.waitText("#fingerprint", "matches the plan", 10*time.Second, false)
		if got := b.text("table.changes"); !strings.Contains(got, topic+"-0") || !strings.Contains(got, "→") {
			t.Errorf("the plan's table: %q", got)
		}
		b.screenshot("plan")
		b.click("#approve", "#event-status")

		// Live progress: pushed, and advancing, without reloading the page.
		b.open("/ui/")
		sel := "#progress-" + r.alias
		var first int64 = -1
		testenv.Eventually(t, 2*time.Minute, func() error {
			v := b.attr(sel, "data-bytes")
			if v == "" {
				return errors.New("no progress pushed yet")
			}
			n, _ := strconv.ParseInt(v, 10, 64)
			if first < 0 {
				first = n
			}
			if n <= first {
				return fmt.Errorf("progress at %d bytes, not past %d yet", n, first)
			}
			return nil
		})
		if got := b.text(sel); !strings.Contains(got, "copied") {
			t.Errorf("progress text %q", got)
		}
		b.screenshot("clusters")

		res := r.result(ch, 4*time.Minute)
		for res.Status.Interim() { // awaiting_approval, then approved: the final result follows
			res = r.result(ch, 4*time.Minute)
		}
		if res.Status != events.StatusSucceeded {
			t.Fatalf("the approved raise: %s (%s)", res.Status, res.Error)
		}
		r.outcome(r.oneStored(id), topic, before, grew(before), false)
		b.open("/ui/audit?" + url.Values{"cluster": {r.alias}, "type": {events.TypeReplicaChangeRequested}}.Encode())
		b.waitText("#results", id, time.Minute, true)
		b.screenshot("audit")
		b.open("/ui/events/" + id)
		b.waitText("#story", "approved", 10*time.Second, false)
		b.screenshot("event")
		r.noLeftovers([]string{topic}, nil)
	})

	t.Run("cancel a running copy", func(t *testing.T) {
		b := b.in(t)
		topic := r.topic("uicancel", [][]int32{{1, 2}}, 8_000_000, nil) // one partition: under the threshold, no approval
		before := r.partitions(topic)
		id, ch := r.publish(events.TypeReplicaChangeRequested, map[string]any{"topic": topic, "replication_factor": 3,
			"throttle_bytes_per_sec": throttleRate})
		r.reassigning(topic, 90*time.Second)
		b.open("/ui/")
		b.waitText(card, id, 30*time.Second, true)
		b.click("#cancel-open-"+id, "#cancel-"+id) // the button is behind a second click
		b.click("#cancel-"+id, "#event-status")
		res := r.result(ch, 3*time.Minute)
		if res.Status != events.StatusCancelled {
			t.Fatalf("the cancelled copy: %s (%s)", res.Status, res.Error)
		}
		r.outcome(r.oneStored(id), topic, before, func(model.Partition) bool { return false }, false)
		r.noLeftovers([]string{topic}, nil)
	})

	t.Run("a viewer sees and cannot act", func(t *testing.T) {
		v := newBrowser(t, "http://"+addr, shots)
		v.signIn(sec.ConsoleViewerToken)
		v.open("/ui/")
		v.waitText(card, r.alias, 10*time.Second, false)
		if n := v.count(`form[action^="/ui/actions/"]`); n != 0 {
			t.Errorf("the viewer's clusters page has %d action forms", n)
		}
		// A forged pause with the viewer's own session and CSRF token: refused, nothing
		// published.
		published, err := r.nc.SubscribeSync("kafkamender.events." + r.alias + ".>")
		if err != nil {
			t.Fatal(err)
		}
		defer published.Unsubscribe()
		testenv.AwaitRouted(t, r.nc) // the worker would publish on its own node
		// From the viewer's page: its session cookie, its CSRF cookie and the CSRF token of
		// its sign-out form, the most a forged request can carry.
		// (the page may be reloading itself: until it has the form, try again)
		var status int
		testenv.Eventually(t, 30*time.Second, func() error {
			var err error
			status, err = eval[int](v, fmt.Sprintf(`(() => {
				const f = document.querySelector("input[name=csrf]");
				if (!f) return -1;
				return fetch("/ui/actions/pause", {method: "POST", body: new URLSearchParams({
					cluster: %q, reason: "forged", csrf: f.value})}).then(r => r.status);
			})()`, r.alias))
			if err == nil && status == -1 {
				err = errors.New("the page has no sign-out form yet")
			}
			return err
		})
		if status != http.StatusForbidden {
			t.Errorf("a viewer's pause: %d, want 403", status)
		}
		// The refusal came after any publish would have: once the subscription's server
		// has answered a ping, it has delivered what it had.
		if err := r.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := published.Pending(); n != 0 {
			t.Errorf("the refused pause published %d events", n)
		}
		v.open("/ui/dead")
		if got := v.text("h1"); got != "Dead letters" {
			t.Errorf("dead letters page: %q", got)
		}
		// On a phone (390 CSS pixels wide): nothing wider than the screen, on any page.
		v.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
		for _, path := range []string{"/ui/", "/ui/plans", "/ui/audit", "/ui/dead"} {
			v.open(path)
			wide, err := eval[int](v, "document.documentElement.scrollWidth - document.documentElement.clientWidth")
			if err != nil {
				t.Fatal(err)
			}
			if wide > 0 {
				t.Errorf("%s on a phone: %d pixels wider than the screen", path, wide)
			}
		}

	})
}
