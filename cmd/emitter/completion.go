package main

// The completion command: a shell completion script for the emitter.

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// commandNames are the emitter's commands, for completion.
var commandNames = []string{"publish", "preferred-leader", "broker-overloaded", "replication-factor", "logdir-move",
	"broker-failed", "broker-drain", "broker-added", "partition-offline", "pause", "resume", "cancel", "approve", "deny",
	"plans", "plan", "status", "result", "completion", "help", "--version"}

// completionScript completes the command names, then each command's flags as its own
// --help lists them (asked of the emitter being completed, so that the flags are never
// out of date; emitter plan: its subcommand show, then show's flags), and the values of
// -o/--output. zsh runs it through bashcompinit.
const completionScript = `# kafkamender emitter completion (bash; zsh: autoload -U bashcompinit && bashcompinit first)
_kafkamender_emitter() {
  local cur prev
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=( $(compgen -W "%s" -- "$cur") )
    return
  fi
  if [ "$COMP_CWORD" -eq 2 ] && [ "${COMP_WORDS[1]}" = plan ]; then
    COMPREPLY=( $(compgen -W "show" -- "$cur") )
    return
  fi
  case "$prev" in
    -o|--output) COMPREPLY=( $(compgen -W "table json" -- "$cur") ); return ;;
    completion) COMPREPLY=( $(compgen -W "bash zsh" -- "$cur") ); return ;;
  esac
  case "$cur" in
    -*)
      local flags sub=""
      [ "${COMP_WORDS[1]}" = plan ] && sub=show
      flags=$("${COMP_WORDS[0]}" "${COMP_WORDS[1]}" $sub --help 2>/dev/null | grep -oE '^  --[a-z0-9-]+' | tr -d ' ')
      COMPREPLY=( $(compgen -W "$flags" -- "$cur") )
      ;;
  esac
}
complete -F _kafkamender_emitter emitter
`

func runCompletion(_ context.Context, args []string, e env) int {
	if len(args) != 1 || !slices.Contains([]string{"bash", "zsh"}, args[0]) {
		if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
			fmt.Fprint(e.stdout, completionUsage)
			return exitOK
		}
		fmt.Fprintf(e.stderr, "emitter completion: want bash or zsh\n\n%s", completionUsage)
		return exitUsage
	}
	fmt.Fprintf(e.stdout, completionScript, strings.Join(commandNames, " "))
	return exitOK
}

const completionUsage = `Usage: emitter completion bash|zsh

Prints a shell completion script: the commands (and plan's subcommand show),
each command's flags, and the values of -o. Load it in the shell's start-up file:

    source <(emitter completion bash)                                 # ~/.bashrc
    autoload -U bashcompinit && bashcompinit
    source <(emitter completion zsh)                                  # ~/.zshrc
`
