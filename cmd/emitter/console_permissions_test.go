package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/stack"
)

// The permissions docs/security.md adds to the worker's for the web console are enough for
// everything the console does: its pages (clusters, plans, a plan, the audit trail, an
// event's story, dead letters), its live stream, its wait for a result, and its buttons.
// And they are needed: without them the same pages make the server log violations.
func TestDocumentedConsolePermissions(t *testing.T) {
	root, err := stack.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	pub, sub, err := documentedConsolePermissions(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("with the console's permissions", func(t *testing.T) {
		v := consoleWorld(t, func(authz string) string { return withWorkerPermissions(t, authz, pub, sub) }, visitConsole)
		if len(v) > 0 {
			t.Errorf("permission violations:\n%s", strings.Join(v, "\n"))
		}
	})
	t.Run("with the worker's only", func(t *testing.T) {
		// The clusters page alone: it names the fleet's consumers, which the worker's
		// permissions do not allow (the page says it cannot read them).
		v := consoleWorld(t, func(authz string) string { return authz }, func(t *testing.T, base string) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second) // the denial is logged at once; the page would wait
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base, nil)
			req.Header.Set("Authorization", "Bearer "+consoleOperatorToken)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
		if !slices.ContainsFunc(v, func(line string) bool { return strings.Contains(line, "CONSUMER.NAMES.KAFKAMENDER_EVENTS") }) {
			t.Errorf("the clusters page met no violation without the permissions docs/security.md says it needs: %q", v)
		}
	})
}

const consoleOperatorToken = "console-operator-token-for-tests"

// consoleWorld runs a worker serving the console on a nats-server with the documented
// authorization (changed by authz), lets visit use the console at base, and returns the
// violations the server logged.
func consoleWorld(t *testing.T, authz func(string) string, visit func(t *testing.T, base string)) []string {
	const workerPW = "worker-secret-1"
	s, v := securityDocServer(t, workerPW, "emitter-secret-1", authz)

	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close) // after the worker stops
	cfg, err := config.ParseEnv(fmt.Appendf(nil, `
worker: {id: console-permissions}
http: {listen: "127.0.0.1:0"}
nats: {url: %q, user: kafkamender-worker}
lock: {backend: nats}
console: {enabled: true}
clusters: {local: {bootstrap_servers: [%q]}}
`, s.ClientURL(), kc.ListenAddrs()[0]), []string{"KAFKAMENDER_NATS_PASSWORD=" + workerPW, "KAFKAMENDER_CONSOLE_OPERATOR_TOKEN=" + consoleOperatorToken})
	if err != nil {
		t.Fatal(err)
	}
	w := runWorker(t, cfg, v)
	visit(t, "http://"+w.Addr()+"/ui/")
	time.Sleep(500 * time.Millisecond) // the server logs asynchronously
	return v.Take()
}

// visitConsole goes through every page, stream and button of the console at base.
func visitConsole(t *testing.T, base string) {
	// A button: the cluster paused, then resumed; each is an event with a result, which
	// the audit trail and the story then read.
	paused := consoleAct(t, base, "pause", url.Values{"cluster": {"local"}, "reason": {"permissions test"}})
	consoleGet(t, base+"live/result/"+paused, "event: result") // waits for the worker's answer
	resumed := consoleAct(t, base, "resume", url.Values{"cluster": {"local"}})
	consoleGet(t, base+"live/result/"+resumed, "event: result")
	consoleAct(t, base, "cancel", url.Values{"cluster": {"local"}, "event": {"no-such-event"}, "reason": {"permissions test"}})

	consoleGet(t, base, "local")
	consoleGet(t, base+"plans", "")
	consoleGet(t, base+"plans/local/no-such-plan", "")
	consoleGet(t, base+"audit?cluster=local", paused)
	consoleGet(t, base+"events/"+paused+"?cluster=local", "cluster-pause")
	consoleGet(t, base+"dead", "")
	consoleGet(t, base+"live", "event: ") // the live stream's first message
}

// consoleGet reads a page (or a stream, until a line contains want) with the operator
// token, and fails unless it is served and contains want.
func consoleGet(t *testing.T, u, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+consoleOperatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", u, resp.Status, body)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
			if strings.Contains(sc.Text(), want) {
				return
			}
		}
		t.Fatalf("GET %s: the stream ended without %q", u, want)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), want) {
		t.Fatalf("GET %s: no %q in\n%s", u, want, body)
	}
}

// consoleAct presses a button with the operator token, and returns the event's id.
func consoleAct(t *testing.T, base, action string, form url.Values) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"actions/"+action, strings.NewReader(form.Encode()))
	req.Header.Set("Authorization", "Bearer "+consoleOperatorToken)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	loc := resp.Header.Get("Location")
	id, ok := strings.CutPrefix(strings.SplitN(loc, "?", 2)[0], "/ui/events/")
	if resp.StatusCode != http.StatusSeeOther || !ok {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s, Location %q\n%s", action, resp.Status, loc, body)
	}
	return id
}

// documentedConsolePermissions reads the subjects docs/security.md adds to the worker's
// publish and subscribe lists for the console (its "Console" section's conf block).
func documentedConsolePermissions(root string) (pub, sub []string, err error) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		return nil, nil, err
	}
	const marker = "# Added to KAFKAMENDER_WORKER's publish list when console.enabled is set:"
	_, rest, ok := strings.Cut(string(doc), marker)
	if !ok {
		return nil, nil, fmt.Errorf("docs/security.md has no %q", marker)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		return nil, nil, fmt.Errorf("docs/security.md: the block after %q does not end", marker)
	}
	pubText, subText, ok := strings.Cut(block, "# Added to its subscribe list")
	if !ok {
		return nil, nil, errors.New("docs/security.md: the console's block has no subscribe list")
	}
	quoted := regexp.MustCompile(`"([^"]+)"`)
	subjects := func(text string) (out []string) {
		for line := range strings.Lines(text) {
			line, _, _ = strings.Cut(line, "#")
			for _, m := range quoted.FindAllStringSubmatch(line, -1) {
				out = append(out, m[1])
			}
		}
		return out
	}
	pub, sub = subjects(pubText), subjects(subText)
	if len(pub) == 0 || len(sub) == 0 {
		return nil, nil, fmt.Errorf("docs/security.md: the console's block lists %d publish and %d subscribe subjects", len(pub), len(sub))
	}
	return pub, sub, nil
}

// withWorkerPermissions adds pub and sub to the worker's lists in authz.
func withWorkerPermissions(t *testing.T, authz string, pub, sub []string) string {
	t.Helper()
	list := func(subjects []string) string {
		return "\n    \"" + strings.Join(subjects, "\", \"") + "\","
	}
	i := strings.Index(authz, "KAFKAMENDER_WORKER = {")
	if i < 0 {
		t.Fatal("docs/security.md's authorization has no KAFKAMENDER_WORKER")
	}
	head, worker := authz[:i], authz[i:]
	for _, add := range []struct {
		key      string
		subjects []string
	}{{"publish: [", pub}, {"subscribe: [", sub}} {
		j := strings.Index(worker, add.key)
		if j < 0 {
			t.Fatalf("KAFKAMENDER_WORKER has no %q", add.key)
		}
		j += len(add.key)
		worker = worker[:j] + list(add.subjects) + worker[j:]
	}
	return head + worker
}
