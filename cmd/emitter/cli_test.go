package main

import (
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The flags that the flag package read before cobra read the same way: one dash or two
// for any flag, the value of a flag taken whatever it looks like, the flags ending at
// the first argument or at "--".
func TestNormalizeFlags(t *testing.T) {
	var o preferredOptions
	cmd := newCommand("preferred-leader", "", printPreferredUsage, &o, env{}, new(int))
	tests := []struct {
		args, want []string
	}{
		{[]string{"-cluster", "local", "-topic=orders", "--broker", "2"}, []string{"--cluster", "local", "--topic=orders", "--broker", "2"}},
		{[]string{"-o", "json", "--o", "json", "-o=json", "--o=json", "-output", "json"},
			[]string{"--o", "json", "--o", "json", "--o=json", "--o=json", "--output", "json"}},
		{[]string{"-wait", "-dry-run=false", "-print"}, []string{"--wait", "--dry-run=false", "--print"}},
		{[]string{"-h"}, []string{"--help"}},
		{[]string{"-help"}, []string{"--help"}},
		// Help ends the command line: the flag package stopped at it.
		{[]string{"-cluster", "x", "-help=false", "--bogus"}, []string{"--cluster", "x", "--help"}},
		{[]string{"-h", "extra"}, []string{"--help"}},
		// A flag's value is never rewritten, even when it looks like a flag.
		{[]string{"-reason", "-wait", "-partition", "-1"}, []string{"--reason", "-wait", "--partition", "-1"}},
		// The flags end at the first argument, at "--", and at an unknown flag.
		{[]string{"-wait", "extra", "-cluster", "x"}, []string{"--wait", "extra", "-cluster", "x"}},
		{[]string{"-wait", "--", "-cluster", "x"}, []string{"--wait", "--", "-cluster", "x"}},
		{[]string{"-wait", "-", "-cluster", "x"}, []string{"--wait", "-", "-cluster", "x"}},
		{[]string{"-nope", "-cluster", "x"}, []string{"--nope", "-cluster", "x"}},
		// Bad syntax is left for pflag to report.
		{[]string{"---x", "-cluster"}, []string{"---x", "-cluster"}},
		{[]string{"-=x"}, []string{"-=x"}},
	}
	for _, tt := range tests {
		if got := normalizeFlags(cmd.Flags(), tt.args); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("normalizeFlags(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// A command line with single-dash flags parses as with double dashes.
func TestSingleDashFlags(t *testing.T) {
	double := []string{"--cluster", "local", "--topic", "orders", "--broker", "2", "--partition", "1", "--partitions=3,4",
		"--strategy", "api", "--output", "json", "--wait", "--timeout=5m", "--reason", "--print", "--nats-url", "nats://n:4222"}
	single := []string{"-cluster", "local", "-topic", "orders", "-broker", "2", "-partition", "1", "-partitions=3,4",
		"-strategy", "api", "-o", "json", "-wait", "-timeout=5m", "-reason", "--print", "-nats-url", "nats://n:4222"}
	e, _, _ := testEnv(nil)
	want, err := parsePreferredFlags(double, e)
	if err != nil {
		t.Fatal(err)
	}
	if want.reason != "--print" || want.print || want.output != outputJSON || len(want.partitions) != 3 {
		t.Fatalf("double-dash options: %+v", want)
	}
	got, err := parsePreferredFlags(single, e)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("single-dash options:\n got %+v\nwant %+v", got, want)
	}
	for _, spelling := range [][]string{{"-o", "json"}, {"--o", "json"}, {"-o=json"}, {"--o=json"}, {"-output", "json"}, {"--output=json"}} {
		o, err := parseResultFlags(append([]string{"-id", "x"}, spelling...), e)
		if err != nil || o.output != outputJSON || o.id != "x" {
			t.Errorf("%q: output %q, id %q, %v", spelling, o.output, o.id, err)
		}
	}

	// Through run, as a script calls it: the same event.
	printed := func(args ...string) string {
		e, stdout, stderr := testEnv(nil)
		if code := run(t.Context(), args, e); code != exitOK {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
		return stdout.String()
	}
	if a, b := printed("broker-added", "-cluster", "local", "-brokers", "4,5", "-throttle", "10MiB", "-print"),
		printed("broker-added", "--cluster", "local", "--brokers", "4,5", "--throttle", "10MiB", "--print"); a != b {
		t.Errorf("single dash:\n%s\ndouble dash:\n%s", a, b)
	}
	if a, b := printed("plans", "-h"), printed("plans", "--help"); a != b || !strings.Contains(a, "Usage: emitter plans") {
		t.Errorf("plans -h:\n%s\nplans --help:\n%s", a, b)
	}
}

// A bad flag is reported in the words of the flag package, which the emitter used before
// cobra.
func TestFlagErrorWords(t *testing.T) {
	overloaded := []string{"broker-overloaded", "--cluster", "local", "--broker", "1"}
	testUsageErrors(t, []usageErrorTest{
		{"unknown single-dash flag", []string{"publish", "-topic", "x"}, []string{"emitter publish: flag provided but not defined: -topic\n"}},
		{"unknown one-letter flag", []string{"publish", "-x"}, []string{"flag provided but not defined: -x\n"}},
		{"glued value", []string{"result", "-ojson"}, []string{"flag provided but not defined: -ojson\n"}},
		{"no value", []string{"publish", "--cluster"}, []string{"flag needs an argument: -cluster\n"}},
		{"no value, one dash", []string{"publish", "-cluster"}, []string{"flag needs an argument: -cluster\n"}},
		{"no value for -o", []string{"status", "-o"}, []string{"flag needs an argument: -o\n"}},
		{"bad boolean", []string{"publish", "--print=maybe"}, []string{`invalid boolean value "maybe" for -print: parse error` + "\n"}},
		{"bad int", append(overloaded, "--max-partitions", "all"), []string{`invalid value "all" for flag -max-partitions: parse error` + "\n"}},
		{"int out of range", append(overloaded, "--max-partitions", "99999999999999999999"),
			[]string{`invalid value "99999999999999999999" for flag -max-partitions: value out of range` + "\n"}},
		{"bad duration", []string{"status", "-timeout", "soon"}, []string{`invalid value "soon" for flag -timeout: parse error` + "\n"}},
		{"bad syntax", []string{"publish", "---x"}, []string{"bad flag syntax: ---x\n"}},
		{"bad syntax, no name", []string{"publish", "-=x"}, []string{"bad flag syntax: -=x\n"}},
		{"flags end at an argument", []string{"publish", "-cluster", "local", "extra", "-type", "x"},
			[]string{`emitter publish: unexpected arguments ["extra" "-type" "x"]` + "\nRun 'emitter publish --help' for usage.\n"}},
		{"flags end at --", []string{"status", "--", "--cluster"}, []string{`unexpected arguments ["--cluster"]`}},
	})
}

// What comes before a command: --help (emitter help) and --version, else a usage error.
func TestRootCommandLine(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}, {"--version", "extra"}} {
		e, stdout, stderr := testEnv(nil)
		if code := run(t.Context(), args, e); code != exitOK || !strings.HasPrefix(stdout.String(), "kafkamender emitter ") || stderr.Len() > 0 {
			t.Errorf("%q: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "Usage:\n"},
		{[]string{"send"}, "emitter: unknown command \"send\"\n\nemitter publishes"},
		{[]string{"--cluster", "local", "publish"}, "emitter: unknown command \"--cluster\"\n\n"},
		{[]string{"-o", "json"}, "emitter: unknown command \"-o\"\n\n"},
		{[]string{"-v"}, "emitter: unknown command \"-v\"\n\n"},
		{[]string{"-h=false"}, "emitter: unknown command \"-h=false\"\n\n"},
		{[]string{"help", "nosuch"}, "emitter help: unknown command \"nosuch\"\n\nemitter publishes"},
		{[]string{"help", "help"}, "emitter help: unknown command \"help\"\n\n"},
		{[]string{"help", "version"}, "emitter help: unknown command \"version\"\n\n"},
		{[]string{"--help", "nosuch"}, "emitter help: unknown command \"nosuch\"\n\n"},
		{[]string{"plan", "--bogus"}, "emitter plan: unknown subcommand \"--bogus\" (want show)\n"},
	} {
		e, stdout, stderr := testEnv(nil)
		if code := run(t.Context(), tt.args, e); code != exitUsage || stdout.Len() > 0 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%q: exit %d, want %d and %q on stderr\nstdout: %s\nstderr: %s", tt.args, code, exitUsage, tt.want, stdout, stderr)
		}
	}
	testHelp(t, []helpTest{
		{[]string{"--help", "publish"}, []string{"Usage: emitter publish"}},
		{[]string{"-h", "plan", "show"}, []string{"Usage: emitter plan show"}},
		{[]string{"help", "plan", "show"}, []string{"Usage: emitter plan show"}},
		{[]string{"help", "completion"}, []string{"Usage: emitter completion bash|zsh|fish"}},
		{[]string{"help", "publish", "--cluster"}, []string{"Usage: emitter publish"}},
		{[]string{"publish", "--cluster", "x", "--help", "--bogus"}, []string{"Usage: emitter publish"}},
		{[]string{"status", "-help=false"}, []string{"Usage: emitter status"}},
	}, nil)
}

// Every command's help, by --help, -h or emitter help, is its usage text, on stdout,
// with its flags as the flag package listed them (and not cobra's --help).
func TestHelpOfEveryCommand(t *testing.T) {
	root := newRootCommand(env{}, new(int))
	var paths [][]string
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() || c.Name() == "help" {
			continue
		}
		paths = append(paths, []string{c.Name()})
		for _, sub := range c.Commands() {
			paths = append(paths, []string{c.Name(), sub.Name()})
		}
	}
	if len(paths) < 20 {
		t.Fatalf("only %d commands: %q", len(paths), paths)
	}
	for _, path := range paths {
		var outs []string
		for _, args := range [][]string{append(slices.Clone(path), "--help"), append(slices.Clone(path), "-h"), append([]string{"help"}, path...)} {
			e, stdout, stderr := testEnv(nil)
			if code := run(t.Context(), args, e); code != exitOK || stderr.Len() > 0 {
				t.Errorf("%q: exit %d, stderr %s", args, code, stderr)
			}
			outs = append(outs, stdout.String())
		}
		out := outs[0]
		if outs[1] != out || outs[2] != out {
			t.Errorf("%q: --help, -h and help differ", path)
		}
		name := strings.Join(path, " ")
		if path[0] == "plan" {
			name = "plan show"
		}
		if !strings.HasPrefix(out, "Usage: emitter "+name) {
			t.Errorf("%q: help is not its usage:\n%s", path, out)
		}
		if strings.Contains(out, "`") || strings.Contains(out, "  --help") {
			t.Errorf("%q: help lists its flags as cobra would:\n%s", path, out)
		}
	}
}

// emitter completion writes a script for bash, zsh and fish, that asks the emitter
// (emitter __complete) for completions.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range completionShells {
		e, stdout, stderr := testEnv(nil)
		if code := run(t.Context(), []string{"completion", shell}, e); code != exitOK {
			t.Fatalf("%s: exit %d: %s", shell, code, stderr)
		}
		script := stdout.String()
		if !strings.Contains(script, "__complete") || !strings.Contains(script, "emitter") {
			t.Errorf("%s: the script does not ask the emitter:\n%s", shell, script)
		}
		// The shell, when installed, finds the script's syntax right.
		if sh, err := exec.LookPath(shell); err == nil {
			cmd := exec.Command(sh, "-n")
			cmd.Stdin = strings.NewReader(script)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", shell, err, out)
			}
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}, {"completion", "--bash"}} {
		e, stdout, stderr := testEnv(nil)
		if code := run(t.Context(), args, e); code != exitUsage || stdout.Len() > 0 ||
			!strings.HasPrefix(stderr.String(), "emitter completion: want bash, zsh or fish\n\nUsage: emitter completion") {
			t.Errorf("%q: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
	testHelp(t, []helpTest{{[]string{"completion", "--help"}, []string{"Usage: emitter completion bash|zsh|fish", "bash-completion"}}}, nil)
}

// The completions the emitter gives the scripts: commands, plan's show, flags, and the
// values of -o, --type, --strategy; after single-dash flags too.
func TestCompletionRequests(t *testing.T) {
	tests := []struct {
		args       []string
		want, not  []string
		descripted string // a completion that has a description
	}{
		{[]string{""}, []string{"publish", "preferred-leader", "plans", "plan", "status", "result", "completion", "help"}, []string{"version"}, "publish"},
		{[]string{"pl"}, []string{"plan", "plans"}, []string{"publish"}, ""},
		{[]string{"plan", ""}, []string{"show"}, nil, "show"},
		{[]string{"plan", "show", "--"}, []string{"--id", "--cluster", "--output", "--server"}, []string{"--all", "--o"}, "--id"},
		{[]string{"plans", "--"}, []string{"--all", "--cluster", "--output"}, []string{"--id"}, ""},
		{[]string{"status", "-o", ""}, []string{"table", "json"}, nil, "json"},
		{[]string{"status", "--output", ""}, []string{"table", "json"}, nil, ""},
		{[]string{"result", "--output="}, []string{"table", "json"}, nil, ""},
		{[]string{"publish", "--type", ""}, []string{"broker-overloaded", "replica-change-requested", "partition-offline"}, nil, "broker-overloaded"},
		{[]string{"publish", "-cluster", "local", "-type", "broker-"}, []string{"broker-overloaded", "broker-failed", "broker-drain", "broker-added"},
			[]string{"replica-change-requested"}, ""},
		{[]string{"preferred-leader", "--strategy", ""}, strategies, nil, ""},
		{[]string{"replication-factor", "-strategy", ""}, rfStrategies, []string{"zk-nudge"}, ""},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}, nil, ""},
		{[]string{"help", "bro"}, []string{"broker-added", "broker-drain", "broker-failed", "broker-overloaded"}, []string{"publish"}, ""},
	}
	for _, tt := range tests {
		e, stdout, stderr := testEnv(nil)
		if code := run(t.Context(), append([]string{"__complete"}, tt.args...), e); code != exitOK {
			t.Errorf("%q: exit %d: %s", tt.args, code, stderr)
			continue
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
			t.Errorf("%q: no directive:\n%s", tt.args, stdout)
			continue
		}
		got := map[string]string{}
		for _, l := range lines[:len(lines)-1] {
			value, desc, _ := strings.Cut(l, "\t")
			got[value] = desc
		}
		for _, w := range tt.want {
			if _, ok := got[w]; !ok {
				t.Errorf("%q: no completion %q in:\n%s", tt.args, w, stdout)
			}
		}
		for _, n := range tt.not {
			if _, ok := got[n]; ok {
				t.Errorf("%q: completion %q in:\n%s", tt.args, n, stdout)
			}
		}
		if d, ok := got[tt.descripted]; tt.descripted != "" && (!ok || d == "" || strings.Contains(d, "`")) {
			t.Errorf("%q: %q has description %q", tt.args, tt.descripted, d)
		}
	}
}
