package check

import (
	"os/exec"
	"regexp"
	"slices"
	"testing"
)

// deploymentConfigs returns every worker configuration the deployments give the image.
func deploymentConfigs(t testing.TB) []deploymentConfig {
	t.Helper()
	var out []deploymentConfig
	for _, w := range composeWorkers(t, composeProject(t)) {
		out = append(out, deploymentConfig{source: composeFile + " service " + w.name, cfg: w.cfg})
	}
	k := kubernetesWorker(t)
	return append(out, deploymentConfig{source: k.cfgSource, cfg: k.cfg})
}

// invocation is a command line the deployments run the worker with.
type invocation struct {
	source string
	args   []string
}

// workerInvocations returns the arguments every deployment passes to the worker.
func workerInvocations(t testing.TB) []invocation {
	t.Helper()
	_, cmd := parseDockerfile(t).entrypoint(t)
	out := []invocation{{"Dockerfile CMD", cmd}}
	for _, w := range composeWorkers(t, composeProject(t)) {
		out = append(out, invocation{composeFile + " service " + w.name, w.service.Command})
	}
	k := kubernetesWorker(t)
	return append(out, invocation{kubeDir + "/deployment.yaml container " + k.c.Name, slices.Concat(k.c.Command, k.c.Args)})
}

// TestWorkerFlags: every flag the deployments pass to the worker is one the worker has,
// as its --help lists them (an unknown flag stops it with exit status 2).
func TestWorkerFlags(t *testing.T) {
	out, err := exec.Command(buildWorker(t), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("worker --help: %v\n%s", err, out)
	}
	var have []string
	for _, m := range regexp.MustCompile(`(?m)^\s+--?([a-z][a-z0-9.-]*)\b`).FindAllStringSubmatch(string(out), -1) {
		have = append(have, m[1])
	}
	if !slices.Contains(have, "config") {
		t.Fatalf("worker --help lists no --config:\n%s", out)
	}
	for _, inv := range workerInvocations(t) {
		flags := flagNames(inv.args)
		if len(flags) == 0 {
			t.Errorf("%s: %q passes no flag (want --config)", inv.source, inv.args)
		}
		for _, f := range flags {
			if !slices.Contains(have, f) {
				t.Errorf("%s: the worker has no flag --%s (it has %v)", inv.source, f, have)
			}
		}
	}
}
