package main

import (
	"fmt"
	"strings"
)

// The three shells' scripts, written from the commands' flags. Each
// completes the commands in first place, help's and completion's
// argument, each command's flags (--name, and -v, -h), the values of the
// flags that take one of a few (--dialect), and, for run and elect, after
// --, a command name, then files.

// flagWords returns the words of fl as typed: --name, and -x for a
// shorthand; valued only those of the flags that take a value.
func flagWords(fl []compFlag, valued bool) []string {
	var out []string
	for _, f := range fl {
		if valued && !f.value {
			continue
		}
		out = append(out, "--"+f.name)
		if f.short != "" {
			out = append(out, "-"+f.short)
		}
	}
	return out
}

func bashCompletion(flags map[string][]compFlag) string {
	var b strings.Builder
	names := completionNames()
	b.WriteString(`# bash completion for dblock. Load it with
#   source <(dblock completion bash)
# (in ~/.bashrc), or save it as /etc/bash_completion.d/dblock.
_dblock() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd=${COMP_WORDS[1]} flags= valued= i
  COMPREPLY=()
  if ((COMP_CWORD == 1)); then
    COMPREPLY=($(compgen -W "` + strings.Join(names, " ") + ` --help --version" -- "$cur"))
    return 0
  fi
  case $cmd in
    help) ((COMP_CWORD == 2)) && COMPREPLY=($(compgen -W "` + strings.Join(names, " ") + `" -- "$cur")); return 0 ;;
    completion) ((COMP_CWORD == 2)) && COMPREPLY=($(compgen -W "` + strings.Join(shells, " ") + `" -- "$cur")); return 0 ;;
`)
	for _, n := range names {
		fl := flags[n]
		if fl == nil || n == "completion" {
			continue
		}
		fmt.Fprintf(&b, "    %s) flags=%q valued=%q ;;\n", n, strings.Join(flagWords(fl, false), " "), strings.Join(flagWords(fl, true), " "))
	}
	b.WriteString(`    *) return 0 ;;
  esac
  # run, elect: after --, CMD and its arguments
  for ((i = 2; i < COMP_CWORD; i++)); do
    if [[ ${COMP_WORDS[i]} == -- ]]; then
      if ((i == COMP_CWORD - 1)); then
        COMPREPLY=($(compgen -c -- "$cur"))
      else
        COMPREPLY=($(compgen -f -- "$cur"))
      fi
      return 0
    fi
  done
  # a flag's value: --name VALUE, or --name=VALUE (bash splits at =)
  local flag=$prev
  if [[ $cur == = ]]; then
    cur=
  elif [[ $prev == = ]]; then
    flag=${COMP_WORDS[COMP_CWORD-2]}
  fi
  if [[ " $valued " == *" $flag "* ]]; then
    case $flag in
`)
	for name, choices := range flagChoices {
		fmt.Fprintf(&b, "      --%s) COMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", name, strings.Join(choices, " "))
	}
	b.WriteString(`    esac
    return 0
  fi
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  fi
  return 0
}
complete -F _dblock dblock
`)
	return b.String()
}

// zshQuote returns s in single quotes for zsh.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// zshHelp escapes a description for _arguments' [...] and _describe's name:help.
func zshHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, ":", `\:`).Replace(s)
}

func zshCompletion(flags map[string][]compFlag) string {
	var b strings.Builder
	names := completionNames()
	b.WriteString(`#compdef dblock
# zsh completion for dblock. Load it with
#   source <(dblock completion zsh)
# (in ~/.zshrc, after compinit), or save it as _dblock in a directory of $fpath.
_dblock() {
  local -a cmds
  cmds=(
`)
	for _, n := range names {
		fmt.Fprintf(&b, "    %s\n", zshQuote(n+":"+zshHelp(commandHelp[n])))
	}
	b.WriteString(`  )
  if ((CURRENT == 2)); then
    _describe -t commands 'dblock command' cmds
    return
  fi
  local cmd=${words[2]}
  shift words
  ((CURRENT--))
  case $cmd in
    help) ((CURRENT == 2)) && _describe -t commands 'dblock command' cmds ;;
    completion) ((CURRENT == 2)) && _values 'shell' ` + strings.Join(shells, " ") + ` ;;
`)
	for _, n := range names {
		fl := flags[n]
		if fl == nil || n == "completion" {
			continue
		}
		fmt.Fprintf(&b, "    %s)\n      _arguments -S -s \\\n", n)
		for _, f := range fl {
			spec := "[" + zshHelp(f.help) + "]"
			if f.value {
				spec += ":" + f.name + ":"
				if f.choices != nil {
					spec += "(" + strings.Join(f.choices, " ") + ")"
				}
			}
			if f.short != "" {
				excl := "(-" + f.short + " --" + f.name + ")"
				fmt.Fprintf(&b, "        %s \\\n", zshQuote(excl+"-"+f.short+spec))
				fmt.Fprintf(&b, "        %s \\\n", zshQuote(excl+"--"+f.name+spec))
				continue
			}
			eq := ""
			if f.value {
				eq = "="
			}
			fmt.Fprintf(&b, "        %s \\\n", zshQuote("--"+f.name+eq+spec))
		}
		if runsCommand[n] {
			b.WriteString("        '*::command:_normal'\n      ;;\n")
		} else {
			b.WriteString("        '*: :'\n      ;;\n")
		}
	}
	b.WriteString(`  esac
}
if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
  _dblock "$@"
else
  compdef _dblock dblock
fi
`)
	return b.String()
}

// fishQuote returns s in single quotes for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

func fishCompletion(flags map[string][]compFlag) string {
	var b strings.Builder
	names := completionNames()
	b.WriteString(`# fish completion for dblock. Load it with
#   dblock completion fish | source
# or save it as ~/.config/fish/completions/dblock.fish.
complete -c dblock -f
`)
	for _, n := range names {
		fmt.Fprintf(&b, "complete -c dblock -n __fish_use_subcommand -a %s -d %s\n", n, fishQuote(commandHelp[n]))
	}
	fmt.Fprintf(&b, "complete -c dblock -n '__fish_seen_subcommand_from help' -a %s\n", fishQuote(strings.Join(names, " ")))
	fmt.Fprintf(&b, "complete -c dblock -n '__fish_seen_subcommand_from completion' -a %s\n", fishQuote(strings.Join(shells, " ")))
	for _, n := range names {
		fl := flags[n]
		if fl == nil || n == "completion" {
			continue
		}
		cond := fishQuote("__fish_seen_subcommand_from " + n + "; and not contains -- -- (commandline -opc)")
		for _, f := range fl {
			fmt.Fprintf(&b, "complete -c dblock -n %s -l %s", cond, f.name)
			if f.short != "" {
				fmt.Fprintf(&b, " -s %s", f.short)
			}
			if f.value {
				b.WriteString(" -x")
				if f.choices != nil {
					fmt.Fprintf(&b, " -a %s", fishQuote(strings.Join(f.choices, " ")))
				}
			}
			fmt.Fprintf(&b, " -d %s\n", fishQuote(f.help))
		}
	}
	b.WriteString(`# run, elect: after --, a command, then its files
complete -c dblock -n '__fish_seen_subcommand_from run elect; and test (commandline -opc)[-1] = --' -a '(__fish_complete_command)'
complete -c dblock -n '__fish_seen_subcommand_from run elect; and contains -- -- (commandline -opc); and not test (commandline -opc)[-1] = --' -F
`)
	return b.String()
}
