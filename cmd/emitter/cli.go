package main

// The emitter's command tree, on cobra: the commands and their flags (pflag), help on
// stdout, --version, shell completion (completion.go); and what keeps the command line
// as it was when the emitter parsed it with the flag package: one dash or two for any
// flag (normalizeFlags), the flag package's words for a bad flag (flagError), the
// flags ending at the first argument, and each command's usage text as its help.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/version"
)

// command is an emitter command that reads flags: its options, and what it does with
// them.
type command interface {
	// define defines the command's flags on fs, pointing at its options, and returns the
	// check of their values once parsed: a usageError, or nil once it has filled in the
	// defaults (such as the event id, the source and the NATS connection).
	define(fs *pflag.FlagSet) (check func(e env) error)
	// run runs the command with checked options and returns its exit status; name is
	// the command as the user calls it ("emitter plan show"), for messages.
	run(ctx context.Context, e env, name string) int
}

// errUnknownCommand: the command line does not start with a command (or the emitter's
// own --help or --version).
var errUnknownCommand = errors.New("unknown command")

// run runs the command line args (without the program name) and returns the exit
// status.
func run(ctx context.Context, args []string, e env) int {
	code := exitOK
	root := newRootCommand(e, &code)
	cobraArgs, err := commandLine(root, args)
	if err != nil {
		return reportError(e, root, args, err)
	}
	root.SetArgs(append([]string{}, cobraArgs...)) // never nil: cobra would read os.Args
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil {
		return reportError(e, cmd, args, err)
	}
	return code
}

// reportError prints the error that cmd's command line args gave, and returns the exit
// status.
func reportError(e env, cmd *cobra.Command, args []string, err error) int {
	var usageErr usageError
	switch {
	case errors.Is(err, errUnknownCommand):
		fmt.Fprintf(e.stderr, "emitter: unknown command %q\n\n", args[0])
		usage(e.stderr)
	case errors.As(err, &usageErr):
		name := cmd.CommandPath()
		fmt.Fprintf(e.stderr, "%s: %s\nRun '%s --help' for usage.\n", name,
			strings.ReplaceAll(err.Error(), "\n", "\n  "), name)
	default:
		fmt.Fprintf(e.stderr, "%s: %v\n", cmd.CommandPath(), err)
		return exitFailure
	}
	return exitUsage
}

// newRootCommand is the emitter's command tree. The commands that run set *code to
// their exit status.
func newRootCommand(e env, code *int) *cobra.Command {
	root := &cobra.Command{
		Use:     "emitter",
		Short:   "publish kafkamender events and show their results",
		Version: version.String(),
		// Reached without a command: emitter alone, or an unknown command.
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return errUnknownCommand
			}
			usage(e.stderr)
			*code = exitUsage
			return nil
		},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("kafkamender emitter {{.Version}} (" + runtime.Version() + ")\n")
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { usage(c.OutOrStdout()) })
	root.SetFlagErrorFunc(func(*cobra.Command, error) error { return errUnknownCommand })
	root.Flags().SetInterspersed(false)
	root.CompletionOptions.DisableDefaultCmd = true // completion.go has the emitter's own
	root.InitDefaultHelpFlag()
	root.Flags().Bool("version", false, "print the version") // no -v: only --version, as before

	add := func(name, short string, usage func(io.Writer, *pflag.FlagSet), c command) *cobra.Command {
		cmd := newCommand(name, short, usage, c, e, code)
		root.AddCommand(cmd)
		return cmd
	}
	add("publish", "build an event of any type from JSON data, check it and publish it", printPublishUsage, &publishOptions{})
	add("preferred-leader", "make a broker the preferred leader of partitions of a topic", printPreferredUsage, &preferredOptions{})
	add("broker-overloaded", "move partition leadership off a broker", printOverloadedUsage, &overloadedOptions{})
	add("replication-factor", "give the partitions of a topic N replicas each", printRFUsage, &rfOptions{})
	add("logdir-move", "move replicas between the log directories of a broker", printLogDirUsage, &logDirOptions{})
	add("broker-failed", "recreate the replicas of a broker gone for good", printBrokerFailedUsage, &brokerFailedOptions{})
	add("broker-drain", "empty a live broker", printBrokerDrainUsage, &brokerDrainOptions{})
	add("broker-added", "move replicas and leaders onto new or empty brokers", printBrokerAddedUsage, &brokerAddedOptions{})
	add("partition-offline", "elect a leader for partitions that have none", printPartitionOfflineUsage, &partitionOfflineOptions{})
	add("pause", "switch the automation off for a cluster", printPauseUsage, &pauseOptions{})
	add("resume", "switch the automation back on for a cluster", printResumeUsage, &pauseOptions{resume: true})
	add("cancel", "cancel an event", printCancelUsage, &cancelOptions{})
	add("approve", "approve a plan that waits for approval", printApproveUsage, &decisionOptions{})
	add("deny", "deny a plan that waits for approval", printDenyUsage, &decisionOptions{deny: true})
	add("plans", "list the plans awaiting approval", printPlansUsage, &plansOptions{})
	show := newCommand("show", "show one plan, partition by partition", printPlanShowUsage, &plansOptions{show: true}, e, code)
	root.AddCommand(newPlanCommand(show, e, code))
	add("status", "per cluster: paused or not, the lock, the operation in flight, the events and plans waiting", printStatusUsage, &statusOptions{})
	add("result", "print the stored result of an event", printResultUsage, &resultOptions{})
	root.AddCommand(newCompletionCommand(e, code))
	root.AddCommand(&cobra.Command{
		Use:                "version",
		Hidden:             true, // emitter --version is the documented spelling
		DisableFlagParsing: true,
		Run: func(c *cobra.Command, _ []string) {
			fmt.Fprintf(c.OutOrStdout(), "kafkamender emitter %s (%s)\n", version.String(), runtime.Version())
		},
	})
	help := newHelpCommand(e, code)
	root.SetHelpCommand(help)
	root.AddCommand(help)
	return root
}

// newCommand is the command called name that reads its flags into c and runs it: help
// prints usage (the flags at the end), and a flag with values to complete (completeWith)
// completes them.
func newCommand(name, short string, usage func(io.Writer, *pflag.FlagSet), c command, e env, code *int) *cobra.Command {
	cmd := &cobra.Command{
		Use:           name,
		Short:         short,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected arguments %q", args)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.SetInterspersed(false) // as with the flag package, the flags end at the first argument
	check := c.define(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		// Shell completion shows a flag's usage: without the backquotes around the name of
		// its value, kept for the help (printFlags).
		name, usage := pflag.UnquoteUsage(f)
		f.Usage = usage
		_ = fs.SetAnnotation(f.Name, valueNameAnnotation, []string{name})
	})
	cmd.InitDefaultHelpFlag()
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagError(err) })
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) { usage(c.OutOrStdout(), c.Flags()) })
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := check(e); err != nil {
			return err
		}
		*code = c.run(cmd.Context(), e, cmd.CommandPath())
		return nil
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if values, ok := f.Annotations[valuesAnnotation]; ok {
			_ = cmd.RegisterFlagCompletionFunc(f.Name, completeValues(values))
		}
	})
	return cmd
}

// newPlanCommand is emitter plan, whose one subcommand is show: emitter plan alone, or
// with another word, is a usage error; its help is show's.
func newPlanCommand(show *cobra.Command, e env, code *int) *cobra.Command {
	const usageHint = "Run 'emitter plan show --help' for usage.\n"
	plan := &cobra.Command{
		Use:                "plan",
		Short:              "show a plan (plan show)",
		Args:               cobra.ArbitraryArgs,
		DisableFlagParsing: true, // its arguments are read below, as they were before cobra
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				fmt.Fprint(e.stderr, "emitter plan: want a subcommand: emitter plan show --id PLAN-ID\n"+usageHint)
				*code = exitUsage
			case slices.Contains([]string{"-h", "-help", "--help", "help"}, args[0]):
				show.HelpFunc()(show, nil)
			default:
				fmt.Fprintf(e.stderr, "emitter plan: unknown subcommand %q (want show)\n"+usageHint, args[0])
				*code = exitUsage
			}
			return nil
		},
	}
	plan.SetHelpFunc(func(*cobra.Command, []string) { show.HelpFunc()(show, nil) })
	plan.AddCommand(show)
	return plan
}

// newHelpCommand is emitter help [COMMAND]: the emitter's usage, or the command's, on
// stdout.
func newHelpCommand(e env, code *int) *cobra.Command {
	return &cobra.Command{
		Use:                "help [COMMAND]",
		Short:              "print the usage of the emitter or of a command",
		DisableFlagParsing: true, // emitter help publish --cluster: publish's help
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []cobra.Completion
			for _, sub := range c.Root().Commands() {
				if sub.IsAvailableCommand() && sub != c && strings.HasPrefix(sub.Name(), toComplete) {
					names = append(names, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				usage(c.OutOrStdout())
				return nil
			}
			cmd, _, err := c.Root().Find(args)
			if err != nil || cmd == c.Root() || cmd == c || !cmd.IsAvailableCommand() {
				fmt.Fprintf(e.stderr, "emitter help: unknown command %q\n\n", args[0])
				usage(e.stderr)
				*code = exitUsage
				return nil
			}
			cmd.HelpFunc()(cmd, args)
			return nil
		},
	}
}

// commandLine is args as cobra is to parse them: the command (such as plan show), then
// its flags normalized (normalizeFlags). Before a command, only the emitter's --help
// (the same as emitter help) and --version are flags; anything else is
// errUnknownCommand. In a completion request (emitter __complete ARGS...), the last
// argument is the word being completed, left as it is.
func commandLine(root *cobra.Command, args []string) ([]string, error) {
	out := slices.Clone(args)
	i, end := 0, len(out)
	completing := len(out) > 1 && (out[0] == cobra.ShellCompRequestCmd || out[0] == cobra.ShellCompNoDescRequestCmd)
	if completing {
		i, end = 1, len(out)-1
	}
	c := root
	for i < end {
		sub := subcommand(c, out[i])
		if sub == nil {
			break
		}
		c, i = sub, i+1
	}
	if c == root && i < end && strings.HasPrefix(out[i], "-") && !completing {
		switch out[i] {
		case "-h", "-help", "--help":
			out[i] = "help" // emitter --help publish: publish's help
			return out, nil
		case "-version", "--version":
			return append(out[:i], "--version"), nil // the rest, if any, was always ignored
		default:
			return nil, errUnknownCommand
		}
	}
	if c.DisableFlagParsing {
		return out, nil
	}
	return slices.Concat(out[:i], normalizeFlags(c.Flags(), out[i:end]), out[end:]), nil
}

// subcommand is the subcommand of c called name, or nil.
func subcommand(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name {
			return sub
		}
	}
	return nil
}

// normalizeFlags rewrites the flags at the start of args, as the flag package read
// them, into the spelling pflag reads: the flag package takes one dash or two for any
// flag, pflag two for a long flag (--cluster) and one for a one-letter one (-o). So a
// flag is rewritten with two dashes: -cluster local as --cluster local, -o=json as
// --o=json (a one-letter flag is also a long flag, see registerOutputFlags), and an
// unknown -name as --name, for pflag to report it. Help (-h, -help=false, --help ...)
// ends the command line, as it did. As with the flag
// package, the flags end at the first argument that is not one (or at "--"), and the
// value of a flag is taken as it is, whatever it looks like.
func normalizeFlags(fs *pflag.FlagSet, args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if len(a) < 2 || a[0] != '-' || a == "--" {
			break
		}
		dashes := 1
		if a[1] == '-' {
			dashes = 2
		}
		name, value, hasValue := strings.Cut(a[dashes:], "=")
		if name == "" || name[0] == '-' {
			break // bad syntax (---x, -=x): pflag says so
		}
		f := fs.Lookup(name)
		if f == nil && len(name) == 1 {
			f = fs.ShorthandLookup(name)
		}
		if f != nil {
			name = f.Name
		}
		if name == "help" {
			// The flag package stopped at -help, -h=false or --help, whatever followed.
			return append(out[:i], "--help")
		}
		out[i] = "--" + name
		if hasValue {
			out[i] += "=" + value
		}
		switch {
		case f == nil:
			return out // pflag stops at it, with an error
		case !hasValue && f.NoOptDefVal == "":
			i++ // its value
		}
	}
	return out
}

// flagError is err, a flag parsing error of pflag, worded as the flag package worded
// it (scripts may match the words), as a usageError.
func flagError(err error) error {
	var (
		unknown *pflag.NotExistError
		noValue *pflag.ValueRequiredError
		invalid *pflag.InvalidValueError
	)
	switch {
	case errors.As(err, &unknown):
		if s := unknown.GetSpecifiedShortnames(); strings.HasPrefix(s, "=") {
			return usageErrorf("bad flag syntax: -%s", s)
		}
		return usageErrorf("flag provided but not defined: -%s", unknown.GetSpecifiedName())
	case errors.As(err, &noValue):
		return usageErrorf("flag needs an argument: -%s", noValue.GetFlag().Name)
	case errors.As(err, &invalid):
		f, cause := invalid.GetFlag(), invalid.Unwrap()
		switch f.Value.Type() {
		case "bool":
			return usageErrorf("invalid boolean value %q for -%s: parse error", invalid.GetValue(), f.Name)
		case "int", "duration": // the flag package's own words; those of the emitter's flag types stay
			cause = errors.New("parse error")
			if errors.Is(invalid.Unwrap(), strconv.ErrRange) {
				cause = errors.New("value out of range")
			}
		}
		return usageErrorf("invalid value %q for flag -%s: %v", invalid.GetValue(), f.Name, cause)
	}
	return usageError{err}
}

// Annotations of flags: the values the shell completes (completeWith), and the name of
// the flag's value in the help (newCommand, printFlags).
const (
	valuesAnnotation    = "kafkamender/values"
	valueNameAnnotation = "kafkamender/value-name"
)

// completeWith has the shell complete the value of the flag called name with values
// (each "value" or "value\tdescription").
func completeWith(fs *pflag.FlagSet, name string, values ...string) {
	if err := fs.SetAnnotation(name, valuesAnnotation, values); err != nil {
		panic(err) // no such flag: a bug
	}
}

// completeValues completes a flag's value with those of values that start with what is
// typed.
func completeValues(values []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var matches []cobra.Completion
		for _, v := range values {
			if value, _, _ := strings.Cut(v, "\t"); strings.HasPrefix(value, toComplete) {
				matches = append(matches, v)
			}
		}
		return matches, cobra.ShellCompDirectiveNoFileComp
	}
}

// registerOutputFlags defines -o and --output, the format of what a command prints:
// table or json. -o is a long flag too (--o, as the flag package took it), hidden from
// the completion of flag names, which offers --output.
func registerOutputFlags(fs *pflag.FlagSet, output *string, usage string) {
	fs.StringVarP(output, "o", "o", outputTable, usage)
	fs.StringVar(output, "output", outputTable, "same as -o")
	_ = fs.MarkHidden("o")
	for _, name := range []string{"o", "output"} {
		completeWith(fs, name, outputTable+"\ta table for people", outputJSON+"\tJSON, as stored")
	}
}

// printFlags prints the flags of fs, each on a line with the name of its value (the
// word between backquotes in its usage, else its type), then its usage and default on
// the next, as flag.PrintDefaults did, with the double-dash spelling that the help
// texts use (and -o for the one-letter flag). The help flag that cobra adds is left
// out: every usage text says --help.
func printFlags(w io.Writer, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if len(f.Annotations[cobra.FlagSetByCobraAnnotation]) > 0 {
			return
		}
		name, usage := pflag.UnquoteUsage(f)
		if n, ok := f.Annotations[valueNameAnnotation]; ok {
			name = n[0] // and usage is unquoted already
		}
		line := "  --" + f.Name
		if len(f.Name) == 1 {
			line = "  -" + f.Name
		}
		if name != "" {
			line += " " + strings.ToUpper(name)
		}
		fmt.Fprintf(w, "%s\n        %s", line, usage)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}
