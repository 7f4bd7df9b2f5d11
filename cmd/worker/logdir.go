package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kafkamender/kafkamender/internal/logdir"
)

// Exit statuses of "worker logdir".
const (
	exitOK           = 0
	exitFailed       = 1 // a refusal or a failure; the reason is on stderr
	exitUsage        = 2
	exitInconsistent = 3 // inspect --strict found inconsistencies
)

const logdirUsage = `Usage: worker logdir inspect --dir DIR [--dir DIR ...] [--strict]
       worker logdir move    --from DIR --to DIR --partition TOPIC-PARTITION
       worker logdir recover --from DIR --to DIR --partition TOPIC-PARTITION

The offline log-directory tool: it works on the log dirs of STOPPED brokers, on
the filesystem only (no broker, controller or ZooKeeper is asked anything).

  inspect  show a log dir's checkpoint files, partition folders, lock and
           meta.properties, and every inconsistency among them; changes nothing
  move     move a partition's folder and checkpoint entries from one log dir of
           a broker to another log dir of the same broker
  recover  copy a partition a broker lost from a log dir of a healthy broker
           holding a replica (a follower) into a log dir of the broken broker;
           nothing in --from is changed

move and recover refuse, changing nothing, when a broker runs (its .lock is
held), when the dirs do not fit the command, or when a checkpoint file is
malformed. Interrupted at any point, they finish when run again with the same
arguments. On a KRaft broker with several log dirs (meta.properties has
directory.id) the broker reports a moved replica's new directory to the
controller when it starts.

Run it as the broker's user or as root: run as root, it re-executes itself as
the owner of the log dirs (which must have one owner) and works as that user.
It follows no symbolic link inside a log dir or its staging directory.

Run "worker logdir COMMAND --help" for a command's flags; docs/logdir-offline.md
has the details.

Exit status: 0 done (or nothing to do), 1 refused or failed (the reason is on
stderr), 2 usage error, 3 inspect --strict found inconsistencies.
`

// logdirCommand runs "worker logdir ARGS".
func logdirCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, logdirUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, logdirUsage)
		return exitOK
	case "inspect":
		return logdirInspect(args[1:], stdout, stderr)
	case "move":
		return logdirChange("move", logdir.Move, args[1:], stdout, stderr)
	case "recover":
		return logdirChange("recover", logdir.Recover, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "worker logdir: unknown command %q\n\n%s", args[0], logdirUsage)
		return exitUsage
	}
}

// dirList is a repeatable --dir flag.
type dirList []string

func (d *dirList) String() string { return strings.Join(*d, ",") }

func (d *dirList) Set(v string) error {
	*d = append(*d, v)
	return nil
}

func logdirInspect(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker logdir inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var dirs dirList
	fs.Var(&dirs, "dir", "a log `dir` to inspect (repeatable)")
	strict := fs.Bool("strict", false, "exit 3 when an inconsistency is found")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: worker logdir inspect --dir DIR [--dir DIR ...] [--strict]

Shows a log dir's meta.properties, whether its .lock is held (and by which
pid), its checkpoint files with their entries, its folders, leftovers of
interrupted runs, and every inconsistency: a partition folder without a
recovery point or high watermark, an entry without a folder, a malformed
checkpoint file, a partition listed twice, a folder Kafka fails on, a
leftover .tmp file, staging leftovers in DIR.kafkamender. Given several dirs
of one broker, it also finds a partition folder in two of them (Kafka refuses
to start then). Changes nothing.

Flags:
  --dir DIR   a log dir to inspect (required; repeatable: give all the dirs
              of a broker to find a partition that is in two of them)
  --strict    exit 3 when an inconsistency is found (default: exit 0)

Exit status: 0, 1 when a dir cannot be read, 2 usage error, 3 inconsistencies
found with --strict.
`)
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if len(dirs) == 0 {
		return usageError(fs, stderr, "--dir is required")
	}
	if code, done := asOwner("inspect", args, dirs, nil, stdout, stderr); done {
		return code
	}
	code, problems := exitOK, 0
	var reports []*logdir.Report
	for i, dir := range dirs {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		r, err := logdir.Inspect(dir)
		if err != nil {
			fmt.Fprintf(stderr, "worker logdir inspect: %v\n", err)
			code = exitFailed
			continue
		}
		if err := r.WriteText(stdout); err != nil {
			fmt.Fprintf(stderr, "worker logdir inspect: %v\n", err)
			return exitFailed
		}
		reports = append(reports, r)
		problems += len(r.Problems)
	}
	if len(dirs) > 1 {
		across := logdir.AcrossDirs(reports...)
		problems += len(across)
		writeAcross(stdout, across)
	}
	if *strict && problems > 0 && code == exitOK {
		code = exitInconsistent
	}
	return code
}

// writeAcross prints the inconsistencies between the inspected dirs.
func writeAcross(w io.Writer, problems []string) {
	if len(problems) == 0 {
		fmt.Fprint(w, "\nacross the log dirs: inconsistencies: none\n")
		return
	}
	fmt.Fprintf(w, "\nacross the log dirs: inconsistencies: %d\n", len(problems))
	for _, p := range problems {
		fmt.Fprintf(w, "  - %s\n", p)
	}
}

// logdirChange runs move or recover.
func logdirChange(name string, do func(logdir.Options) (*logdir.Result, error), args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker logdir "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the log `dir` that holds the partition")
	to := fs.String("to", "", "the log `dir` that gets it")
	partition := fs.String("partition", "", "the partition, `TOPIC-PARTITION`")
	fs.Usage = func() { fmt.Fprint(fs.Output(), changeUsage[name]) }
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	for _, f := range []struct{ name, value string }{{"from", *from}, {"to", *to}, {"partition", *partition}} {
		if f.value == "" {
			return usageError(fs, stderr, "--"+f.name+" is required")
		}
	}
	if _, err := logdir.ParseTP(*partition); err != nil {
		return usageError(fs, stderr, "--partition: "+err.Error())
	}
	staging := []string{*from, *to} // move stages its copy in --to's and the source's trash in --from's
	if name == "recover" {
		staging = staging[1:] // nothing in --from is changed
	}
	if code, done := asOwner(name, args, []string{*from, *to}, staging, stdout, stderr); done {
		return code
	}
	_, err := do(logdir.Options{From: *from, To: *to, Partition: *partition, Out: stdout})
	var refusal *logdir.Refusal
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &refusal):
		fmt.Fprintf(stderr, "worker logdir %s: refused: %v\n", name, err)
	default:
		fmt.Fprintf(stderr, "worker logdir %s: failed: %v\n(run the same command again to resume: every step is safe to repeat)\n", name, err)
	}
	return exitFailed
}

var changeUsage = map[string]string{
	"move": `Usage: worker logdir move --from DIR --to DIR --partition TOPIC-PARTITION

Moves the folder of TOPIC-PARTITION, with its entries in the four checkpoint
files, from the log dir --from to the log dir --to of the same broker, which
must be stopped. The copy is staged in TO.kafkamender (never inside a log dir),
fsynced, verified (SHA-256) and renamed into place; then the checkpoint entries
move; then the source is removed. Interrupted at any point, the same command
finishes the move.

It refuses, changing nothing, when: the dirs are the same or not of one broker
(broker.id/node.id, cluster.id), a .lock is held (the broker runs), a dir is of
a KRaft broker with several log dirs (directory.id), a checkpoint file is
malformed or lists a partition twice, the partition is in neither dir, --to
holds a different copy of it, an online move of it is pending, or the staging
directory would be on another filesystem.

Flags:
  --from DIR                     the log dir that holds the partition
  --to DIR                       the log dir that gets it
  --partition TOPIC-PARTITION    e.g. orders-3 (topic names may contain - and .)

Exit status: 0 moved (or nothing left to do), 1 refused or failed (the reason
is on stderr), 2 usage error.
`,
	"recover": `Usage: worker logdir recover --from DIR --to DIR --partition TOPIC-PARTITION

Copies the folder of TOPIC-PARTITION from --from, a log dir of a healthy broker
with a replica of it (a follower), into --to, a log dir of the broken broker
that lost it, and gives --to the checkpoint entries --from has for it. Both
brokers must be stopped, of one cluster, and different. Nothing in --from is
changed. Interrupted at any point, the same command finishes the recovery.

It refuses, changing nothing, when: the dirs are of the same broker or of other
clusters, a .lock is held (a broker runs), a checkpoint file is malformed or
lists a partition twice, --from lacks the partition, --to already holds a copy
that differs, or the staging directory would be on another filesystem.

Flags:
  --from DIR                     the healthy broker's log dir
  --to DIR                       the broken broker's log dir
  --partition TOPIC-PARTITION    e.g. orders-3 (topic names may contain - and .)

Exit status: 0 recovered (or nothing left to do), 1 refused or failed (the
reason is on stderr), 2 usage error.
`,
}

// parseFlags parses args; ok is false when the command ends here, with code.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if helpAsked(args) {
		fs.SetOutput(stdout)
		fs.Usage()
		return exitOK, false
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, fmt.Sprintf("unexpected arguments: %q", fs.Args())), false
	}
	return 0, true
}

func usageError(fs *flag.FlagSet, stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "%s: %s\n", fs.Name(), msg)
	fs.Usage()
	return exitUsage
}

// asOwner runs "worker logdir name args..." as the owner of the log dirs when this
// process is root and they are not root's (logdir.PlanDrop): it re-executes this binary
// as that user, which does all the work, creates beforehand the staging directories of
// the dirs in staging that the user may be unable to create, and removes them afterwards
// when empty. done reports that it ran the command (or refused to), with its exit status;
// when it is false the command runs in this process.
func asOwner(name string, args, dirs, staging []string, stdout, stderr io.Writer) (code int, done bool) {
	drop, err := logdir.PlanDrop(dirs...)
	if err != nil {
		fmt.Fprintf(stderr, "worker logdir %s: refused: %v\n", name, err)
		return exitFailed, true
	}
	if drop == nil {
		return 0, false
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "worker logdir %s: find this program to run it as %s: %v\n", name, drop, err)
		return exitFailed, true
	}
	if err := drop.Prepare(staging...); err != nil {
		fmt.Fprintf(stderr, "worker logdir %s: failed: %v\n", name, err)
		return exitFailed, true
	}
	code = runAs(drop, exe, append([]string{"logdir", name}, args...), name, stdout, stderr)
	if err := drop.Finish(stdout); err != nil {
		fmt.Fprintf(stderr, "worker logdir %s: %v\n", name, err)
		code = max(code, exitFailed)
	}
	return code, true
}

// runAs runs exe with args as the drop's user, passing signals on, and returns its exit
// status.
func runAs(drop *logdir.Drop, exe string, args []string, name string, stdout, stderr io.Writer) int {
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = drop.SysProcAttr()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "worker logdir %s: cannot run %s as %s, the owner of the log dirs: %v "+
			"(that user must be able to run it: install it in e.g. /usr/local/bin)\n", name, exe, drop, err)
		return exitFailed
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer func() {
		signal.Stop(sigs)
		close(sigs)
	}()
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return exit.ExitCode()
	default:
		fmt.Fprintf(stderr, "worker logdir %s: the process running as %s ended: %v\n", name, drop, err)
		return exitFailed
	}
}
