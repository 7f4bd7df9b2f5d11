// Package docs_test keeps the repository's documentation true to the repository: every
// link, file, task and command that README.md and docs/*.md mention exists, and nothing
// points outside the repository.
package docs_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// root is the repository root, from this package's directory.
const root = ".."

// pages returns README.md and every docs/*.md, by their path from the root.
func pages(t *testing.T) map[string]string {
	t.Helper()
	paths := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range more {
		rel, _ := filepath.Rel(root, p)
		paths = append(paths, rel)
	}
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	return out
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	fenceRE   = regexp.MustCompile("(?s)```.*?```")
	// A repository path in backticks: a top-level directory of the repository, then more.
	pathRE = regexp.MustCompile("`((?:cmd|internal|deployments|docs|tools|\\.ci)/[A-Za-z0-9_./<>*-]*|Taskfile\\.yml|Dockerfile|go\\.mod)`")
	taskRE = regexp.MustCompile(`go tool task ([a-z][a-z:-]*)`)
)

// slug is the anchor GitHub gives a heading.
func slug(heading string) string {
	h := strings.ToLower(strings.TrimSpace(heading))
	h = strings.NewReplacer("`", "", "*", "").Replace(h)
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ' || r == '-':
			b.WriteRune('-')
		case r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(page string) []string {
	var out []string
	for _, m := range headingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(page, ""), -1) {
		out = append(out, slug(m[1]))
	}
	return out
}

// Every relative link points at a file of the repository, and at a heading of it when it
// names one.
func TestLinksResolve(t *testing.T) {
	all := pages(t)
	for name, page := range all {
		for _, m := range linkRE.FindAllStringSubmatch(page, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := name
			if file != "" {
				path = filepath.Join(filepath.Dir(name), file)
			}
			if rel, err := filepath.Rel(".", path); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s: link %s points outside the repository", name, target)
				continue
			}
			if _, err := os.Stat(filepath.Join(root, path)); err != nil {
				t.Errorf("%s: link %s: %s does not exist", name, target, path)
				continue
			}
			if anchor == "" {
				continue
			}
			linked, ok := all[filepath.ToSlash(path)]
			if !ok {
				b, err := os.ReadFile(filepath.Join(root, path))
				if err != nil {
					t.Errorf("%s: link %s: %v", name, target, err)
					continue
				}
				linked = string(b)
			}
			if !slices.Contains(anchors(linked), anchor) {
				t.Errorf("%s: link %s: %s has no heading #%s (it has %v)", name, target, path, anchor, anchors(linked))
			}
		}
	}
}

// Every repository path the pages name in backticks exists (a <placeholder> or * matches
// any name).
func TestPathsExist(t *testing.T) {
	for name, page := range pages(t) {
		for _, m := range pathRE.FindAllStringSubmatch(page, -1) {
			p := strings.TrimSuffix(m[1], "/")
			glob := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(p, "*")
			matches, err := filepath.Glob(filepath.Join(root, glob))
			if err != nil || len(matches) == 0 {
				t.Errorf("%s mentions `%s`, which the repository does not have", name, m[1])
			}
		}
	}
}

// Every `go tool task X` the pages show is a task of Taskfile.yml.
func TestTasksExist(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "Taskfile.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tasks map[string]any `yaml:"tasks"`
	}
	if err := yaml.Unmarshal(b, &tf); err != nil {
		t.Fatal(err)
	}
	for name, page := range pages(t) {
		for _, m := range taskRE.FindAllStringSubmatch(page, -1) {
			if _, ok := tf.Tasks[m[1]]; !ok {
				t.Errorf("%s shows `go tool task %s`, which Taskfile.yml does not have", name, m[1])
			}
		}
	}
}

// Nothing sends a reader to files outside the repository (the design folder the project
// was started from is not part of it).
func TestNothingPointsOutside(t *testing.T) {
	for name, page := range pages(t) {
		for _, bad := range []string{"../shared", "DESIGN.md", "KAFKA.md", "STYLE.md"} {
			if strings.Contains(page, bad) {
				t.Errorf("%s mentions %s, which is not in the repository", name, bad)
			}
		}
	}
}

// Every emitter subcommand the pages show (in code: `emitter X`, bin/emitter X,
// ./cmd/emitter X) is one the emitter's usage lists.
func TestEmitterCommandsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the emitter")
	}
	out, _ := exec.Command("go", "run", "../cmd/emitter", "--help").CombinedOutput()
	commands := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+emitter ([a-z][a-z-]+)`).FindAllStringSubmatch(string(out), -1) {
		commands[m[1]] = true
	}
	if len(commands) < 5 {
		t.Fatalf("the emitter's usage lists %d commands:\n%s", len(commands), out)
	}
	re := regexp.MustCompile("(?m)(?:`|^|bin/|cmd/)emitter ([a-z][a-z-]+)")
	for name, page := range pages(t) {
		for _, m := range re.FindAllStringSubmatch(page, -1) {
			if !commands[m[1]] {
				t.Errorf("%s shows `emitter %s`; the emitter's commands are %v", name, m[1], slices.Sorted(maps.Keys(commands)))
			}
		}
	}
}
