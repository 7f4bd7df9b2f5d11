package check

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/kafkamender/kafkamender/internal/config"
)

// The packages the image builds, and the binaries the final stage must have.
var (
	imagePackages = []string{"./cmd/worker", "./cmd/emitter", "./deployments/docker/healthcheck"}
	imageBinaries = []string{"worker", "emitter", "healthcheck"}
)

// dockerfile is the parsed Dockerfile of the repository root.
type dockerfile struct {
	stages []instructions.Stage
	final  *instructions.Stage
}

func parseDockerfile(t testing.TB) dockerfile {
	t.Helper()
	res, err := parser.Parse(bytes.NewReader(readRepoFile(t, "Dockerfile")))
	if err != nil {
		t.Fatalf("parse Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile parser warning: %s", w.Short)
	}
	var lints []string
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		lints = append(lints, fmt.Sprintf("line %d: %s: %s", line, rule, msg))
	}})
	stages, _, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("Dockerfile instructions: %v", err)
	}
	for _, l := range lints {
		t.Errorf("Dockerfile lint: %s", l)
	}
	if len(stages) == 0 {
		t.Fatal("Dockerfile has no stage")
	}
	return dockerfile{stages: stages, final: &stages[len(stages)-1]}
}

// commands returns the stage's commands of type T.
func commands[T instructions.Command](s *instructions.Stage) []T {
	var out []T
	for _, c := range s.Commands {
		if v, ok := c.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// imageEntrypoint returns the final stage's ENTRYPOINT and CMD, in exec form.
func (d dockerfile) entrypoint(t testing.TB) (entrypoint, cmd []string) {
	t.Helper()
	eps := commands[*instructions.EntrypointCommand](d.final)
	cmds := commands[*instructions.CmdCommand](d.final)
	if len(eps) != 1 || len(cmds) != 1 {
		t.Fatalf("final stage: %d ENTRYPOINT and %d CMD, want one each", len(eps), len(cmds))
	}
	if eps[0].PrependShell || cmds[0].PrependShell {
		t.Fatal("final stage: ENTRYPOINT and CMD must be in exec form (the image has no shell)")
	}
	return eps[0].CmdLine, cmds[0].CmdLine
}

func TestDockerfileStages(t *testing.T) {
	d := parseDockerfile(t)
	if len(d.stages) < 2 {
		t.Fatalf("%d stage(s), want a multi-stage build", len(d.stages))
	}
	names := map[string]bool{}
	for _, s := range d.stages[:len(d.stages)-1] {
		names[s.Name] = true
	}

	// The build stage: a pinned Go image, modules downloaded under a cache, and one go build
	// of every image package, static, trimmed, stripped.
	build := &d.stages[0]
	if want := "golang:" + strings.TrimPrefix(goModToolchain(t), "go"); build.BaseName != want {
		t.Errorf("build stage FROM %s: want %s, the Go of go.mod's toolchain line", build.BaseName, want)
	}
	if !slices.ContainsFunc(commands[*instructions.ArgCommand](build), func(a *instructions.ArgCommand) bool {
		return slices.ContainsFunc(a.Args, func(kv instructions.KeyValuePairOptional) bool { return kv.Key == "VERSION" })
	}) {
		t.Error("build stage: no ARG VERSION, the version stamped into the binaries")
	}
	var downloaded, built bool
	for _, run := range commands[*instructions.RunCommand](build) {
		line := strings.Join(run.CmdLine, " ")
		if strings.Contains(line, "go mod download") {
			downloaded = true
			if !hasCacheMount(run, "/go/pkg/mod") {
				t.Errorf("RUN %s: want --mount=type=cache,target=/go/pkg/mod", line)
			}
		}
		if !strings.Contains(line, "go build") {
			continue
		}
		built = true
		for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags="-s -w -X github.com/kafkamender/kafkamender/internal/version.Version=${VERSION}"`} {
			if !strings.Contains(line, want) {
				t.Errorf("RUN %s: lacks %s", line, want)
			}
		}
		for _, pkg := range imagePackages {
			if !slices.Contains(strings.Fields(line), pkg) {
				t.Errorf("RUN %s: does not build %s", line, pkg)
			}
		}
		if !hasCacheMount(run, "/go/pkg/mod") {
			t.Errorf("RUN %s: want the module cache mounted", line)
		}
	}
	if !downloaded || !built {
		t.Errorf("build stage: go mod download %v, go build %v; want both", downloaded, built)
	}

	// The final stage: a small static base, the binaries copied from the build stage, a
	// numeric non-root user, the HTTP port, the worker as entrypoint.
	if !strings.HasPrefix(d.final.BaseName, "gcr.io/distroless/static") || !strings.Contains(d.final.BaseName, ":") {
		t.Errorf("final stage FROM %s: want a pinned gcr.io/distroless/static image", d.final.BaseName)
	}
	var copied []string
	for _, c := range commands[*instructions.CopyCommand](d.final) {
		if c.From == "" || !names[c.From] {
			t.Errorf("final stage COPY %v: want files from a build stage only", c.SourcePaths)
			continue
		}
		for _, src := range c.SourcePaths {
			copied = append(copied, path.Join(c.DestPath, path.Base(src)))
		}
	}
	for _, bin := range imageBinaries {
		if !slices.Contains(copied, "/usr/local/bin/"+bin) {
			t.Errorf("final stage has no /usr/local/bin/%s (copied: %v)", bin, copied)
		}
	}
	users := commands[*instructions.UserCommand](d.final)
	if len(users) == 0 {
		t.Fatal("final stage sets no USER: the worker would run as root")
	}
	user := users[len(users)-1].User
	uid, _, _ := strings.Cut(user, ":")
	if !regexpMatch(`^[1-9][0-9]*$`, uid) {
		t.Errorf("final USER %q: want a numeric uid other than 0 (runAsNonRoot cannot check a name)", user)
	}

	ep, cmd := d.entrypoint(t)
	if len(ep) != 1 || ep[0] != "/usr/local/bin/worker" {
		t.Errorf("ENTRYPOINT %q: want [/usr/local/bin/worker]", ep)
	}
	cfgPath, ok := flagValue(cmd, "config")
	if !ok || cfgPath != "/etc/kafkamender/worker.yaml" {
		t.Errorf("CMD %q: want --config /etc/kafkamender/worker.yaml", cmd)
	}
}

// TestDockerfileExposesTheConfiguredPort: the image EXPOSEs the port of http.listen in
// every worker configuration the deployments give it.
func TestDockerfileExposesTheConfiguredPort(t *testing.T) {
	d := parseDockerfile(t)
	var exposed []string
	for _, e := range commands[*instructions.ExposeCommand](d.final) {
		for _, p := range e.Ports {
			exposed = append(exposed, strings.TrimSuffix(p, "/tcp"))
		}
	}
	for _, c := range deploymentConfigs(t) {
		port := listenPort(t, c.cfg)
		if !slices.Contains(exposed, port) {
			t.Errorf("%s: http.listen port %s is not EXPOSEd (EXPOSE %v)", c.source, port, exposed)
		}
	}
}

// TestDockerBuildContext: every file the image's go build compiles is in the build
// context, which .dockerignore narrows, and is copied into the build stage.
func TestDockerBuildContext(t *testing.T) {
	root := repoRoot(t)
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	d := parseDockerfile(t)
	var copiedSrc []string
	for _, c := range commands[*instructions.CopyCommand](&d.stages[0]) {
		if c.From == "" {
			copiedSrc = append(copiedSrc, c.SourcePaths...)
		}
	}

	files := []string{"go.mod", "go.sum"}
	args := append([]string{"list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}\n{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}\n{{end}}{{end}}{{end}}"}, imagePackages...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, abs := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, abs)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	if len(files) < 10 {
		t.Fatalf("go list found only %v", files)
	}
	for _, file := range files {
		excluded, err := pm.MatchesOrParentMatches(file)
		if err != nil {
			t.Fatal(err)
		}
		if excluded {
			t.Errorf("%s is compiled into the image but .dockerignore leaves it out of the build context", file)
		}
		if !slices.ContainsFunc(copiedSrc, func(src string) bool { return covers(src, file) }) {
			t.Errorf("%s is compiled into the image but no COPY of the build stage copies it (COPY sources %v)", file, copiedSrc)
		}
	}
	// And the context stays small: the local stack's state and caches never go in.
	for _, heavy := range []string{".git/HEAD", ".cache/x", ".state/stack/x", "bin/worker", "docs/contract.md"} {
		if excluded, _ := pm.MatchesOrParentMatches(heavy); !excluded {
			t.Errorf(".dockerignore sends %s to the build context", heavy)
		}
	}
}

// covers reports whether a COPY source (a path in the build context) includes file.
func covers(src, file string) bool {
	src = strings.TrimSuffix(path.Clean(strings.TrimPrefix(src, "./")), "/")
	return src == "." || file == src || strings.HasPrefix(file, src+"/")
}

func hasCacheMount(run *instructions.RunCommand, target string) bool {
	// The parser leaves --mount values for the build to expand (they may name ARGs); this
	// Dockerfile uses none, so expanding each word to itself evaluates them.
	if err := run.Expand(func(word string) (string, error) { return word, nil }); err != nil {
		return false
	}
	for _, m := range instructions.GetMounts(run) {
		if m.Type == instructions.MountTypeCache && m.Target == target {
			return true
		}
	}
	return false
}

// deploymentConfig is a worker configuration one of the deployments gives the image.
type deploymentConfig struct {
	source string // where it comes from, for messages
	cfg    *config.Config
}

// listenPort returns the port of the configuration's http.listen.
func listenPort(t testing.TB, cfg *config.Config) string {
	t.Helper()
	_, port, err := splitHostPort(cfg.HTTP.Listen)
	if err != nil {
		t.Fatalf("http.listen %q: %v", cfg.HTTP.Listen, err)
	}
	return port
}

// goModToolchain is go.mod's toolchain line (go1.N.P).
func goModToolchain(t testing.TB) string {
	t.Helper()
	for _, line := range strings.Split(string(readRepoFile(t, "go.mod")), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "toolchain "); ok {
			return v
		}
	}
	t.Fatal("go.mod has no toolchain line")
	return ""
}
