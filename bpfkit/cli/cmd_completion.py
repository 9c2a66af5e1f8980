# SPDX-License-Identifier: Apache-2.0
"""``bpfkit completion bash|zsh``: a shell completion script generated from bpfkit's parser.

The script holds the parser's tables (sub-commands, options, which argument takes what) and
completes, like bpftool's: sub-commands and options; object files (``*.o``) where an object
goes; the programs and maps of the object already on the line (``bpfkit completion --programs
OBJ``: the object's spec, read without a kernel); paths under bpffs (/sys/fs/bpf) where a pin
goes; probe specs: their kinds, tracepoint groups and names from tracefs
(``events/GROUP/NAME/``), kprobe functions from ``available_filter_functions``.

    eval "$(bpfkit completion bash)"     # or: bpfkit completion bash > /etc/bash_completion.d/bpfkit
    eval "$(bpfkit completion zsh)"      # zsh: the bash function through bashcompinit
"""

from __future__ import annotations

import argparse
import sys

OFFLINE = True  # reads the parser and object files: no kernel object made
DESCRIPTION = (
    "Print a completion script for bash or zsh, generated from bpfkit's parser: "
    'eval "$(bpfkit completion bash)", or save it in /etc/bash_completion.d/bpfkit.'
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=("bash", "zsh"), nargs="?", help="the shell to complete for")
    # What the script calls back for the names inside an object (hidden: not for people).
    parser.add_argument("--programs", metavar="OBJ", help=argparse.SUPPRESS)
    parser.add_argument("--maps", metavar="OBJ", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.programs or args.maps:
        return _print_names(args.programs, args.maps)
    if args.shell is None:
        from ..errors import UsageError

        raise UsageError("bpfkit completion: name the shell: bpfkit completion bash|zsh")
    tables = parser_tables(args._build_parser())  # bpfkit.cli.main's, passed in (main imports this module)
    sys.stdout.write(bash_script(tables) if args.shell == "bash" else zsh_script(tables))
    return 0


def _print_names(programs: str | None, maps: str | None) -> int:
    """The program (or map) names of an object, one a line; nothing when it cannot be read
    (a completion prints no errors into the command line being typed)."""
    from ..errors import BPFKitError
    from ..spec.load import load_spec

    try:
        spec = load_spec(programs or maps or "")
    except (BPFKitError, OSError):
        return 1
    names = spec.programs if programs else spec.maps
    sys.stdout.write("".join(f"{name}\n" for name in sorted(names) if not name.startswith(".")))
    return 0


# ------------------------------------------------------------------- tables from the parser

# What an argument's values are, told by its dest or metavar (the parser's own names):
#   object   *.o files                 program, map   names inside the object on the line
#   bpffs    paths under /sys/fs/bpf    probe          probe specs     dir, file   the file system
#   words:W  one of the choices W       none           nothing to offer (numbers, free text)
_KIND_BY_DEST = {
    "object": "object", "btf": "object", "program": "program", "events": "map", "stacks": "map",
    "stack_map": "map", "spec": "probe", "pin": "bpffs", "pin_dir": "bpffs", "maps_dir": "bpffs",
    "pinned": "bpffs", "cgroup": "dir", "root": "dir", "binary": "file", "output": "file",
    "metrics_config": "file", "kernel_btf": "file",
}
_KIND_BY_METAVAR = {"ID|PATH": "bpffs", "PATH": "bpffs", "FILE": "file", "DIR": "dir"}
_KIND_BY_COMMAND_DEST = {("bpfkit cgroup show", "path"): "dir", ("bpfkit link pin", "target"): "none"}


def _kind(command: str, action: argparse.Action) -> str:
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return "words:" + " ".join(str(c) for c in action.choices)
    if (command, action.dest) == ("bpfkit features", "names"):
        from ..features import names  # the registry's names (no probe runs)

        return "words:" + " ".join(names())
    by_command = _KIND_BY_COMMAND_DEST.get((command, action.dest))
    if by_command:
        return by_command
    if action.dest in _KIND_BY_DEST:
        return _KIND_BY_DEST[action.dest]
    return _KIND_BY_METAVAR.get(str(action.metavar), "none")


class Tables:
    """A parser as the script's tables, keyed by the command path ("bpfkit", "bpfkit prog show";
    bash before 5.2 has no empty keys)."""

    def __init__(self) -> None:
        self.commands: dict[str, list[str]] = {}  # path -> its sub-commands
        self.options: dict[str, list[str]] = {}  # path -> every option string
        self.option_kinds: dict[str, str] = {}  # "path OPTION" -> kind of its value (options taking one)
        self.positionals: dict[str, list[str]] = {}  # path -> kinds in order; "...*" repeats


def parser_tables(parser: argparse.ArgumentParser) -> Tables:
    tables = Tables()
    _walk(parser, "bpfkit", tables)
    return tables


def _walk(parser: argparse.ArgumentParser, path: str, tables: Tables) -> None:
    load = getattr(parser, "_load", None)  # a sub-command's arguments come with its module
    if load is not None:
        load()
    options: list[str] = []
    positionals: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            tables.commands[path] = list(action.choices)
            for name, sub in action.choices.items():
                _walk(sub, f"{path} {name}", tables)
        elif action.option_strings:
            if action.help == argparse.SUPPRESS:
                continue
            options += action.option_strings
            if action.nargs != 0:
                for opt in action.option_strings:
                    tables.option_kinds[f"{path} {opt}"] = _kind(path, action)
        else:
            repeat = "*" if action.nargs in ("*", "+", argparse.REMAINDER) else ""
            positionals.append(_kind(path, action) + repeat)
    tables.options[path] = options
    tables.positionals[path] = positionals


# ------------------------------------------------------------------- the scripts


def _assoc(name: str, table: dict[str, str]) -> str:
    rows = "".join(f"    [{_quote(k)}]={_quote(v)}\n" for k, v in sorted(table.items()))
    return f"declare -gA {name}=(\n{rows})\n"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def bash_script(t: Tables) -> str:
    from .._version import __version__
    from ..probespec import KINDS

    kinds = " ".join(sorted(f"{k}:" for k in KINDS))
    return (
        f"# bash completion for bpfkit {__version__}: generated by `bpfkit completion bash` from its parser.\n"
        + _assoc("_bpfkit_commands", {k: " ".join(v) for k, v in t.commands.items()})
        + _assoc("_bpfkit_options", {k: " ".join(v) for k, v in t.options.items()})
        + _assoc("_bpfkit_option_kinds", t.option_kinds)
        + _assoc("_bpfkit_positionals", {k: "\t".join(v) for k, v in t.positionals.items()})
        + f"_bpfkit_probe_kinds={_quote(kinds)}\n"
        + _BASH_FUNCTIONS
    )


def zsh_script(t: Tables) -> str:
    # zsh runs bash completion functions through bashcompinit (COMP_WORDS, compgen, complete).
    return ("# zsh completion for bpfkit: the bash completion through bashcompinit.\n"
            "autoload -U +X compinit && compinit\nautoload -U +X bashcompinit && bashcompinit\n"
            + bash_script(t))


# The completion function, for bash and for zsh's bashcompinit (so: no compgen, whose zsh
# emulation neither filters -W words nor takes -X; no variable named path or words, which zsh
# ties to PATH and to its completion). Words are taken from COMP_LINE up to the cursor (split
# on blanks), not from COMP_WORDS, which bash splits at ':' and '=' as well (COMP_WORDBREAKS): a
# probe spec is one word here. In bash, candidates are then trimmed up to the last ':' or '=' of
# the current word, as bash-completion's __ltrim_colon_completions does, since bash replaces
# only the part after it.
_BASH_FUNCTIONS = r'''
_bpfkit_tracefs() {
    local d
    for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
        [[ -d $d/events ]] && { printf '%s' "$d"; return 0; }
    done
    return 1
}

_bpfkit_words() {  # _bpfkit_words CUR WORD...: the words starting with CUR
    local cur=$1 w
    shift
    for w in "$@"; do
        [[ $w == "$cur"* ]] && printf '%s\n' "$w"
    done
}

_bpfkit_paths() {  # _bpfkit_paths CUR [GLOB]: directories (with a '/') and the files matching GLOB
    local f
    for f in "$1"*; do
        if [[ -d $f ]]; then
            printf '%s/\n' "$f"
        elif [[ -e $f && ${f##*/} == ${2:-*} ]]; then
            printf '%s\n' "$f"
        fi
    done
}

_bpfkit_dirs_in() {  # _bpfkit_dirs_in DIR PREFIX: names of DIR's sub-directories starting with PREFIX
    local e
    for e in "$1"/"$2"*/; do
        [[ -d $e ]] || continue
        e=${e%/}
        printf '%s\n' "${e##*/}"
    done
}

_bpfkit_probe() {  # candidates for a probe spec being typed
    local cur=$1 tfs kind rest group
    if [[ $cur != *:* ]]; then
        _bpfkit_words "$cur" $_bpfkit_probe_kinds
        return
    fi
    kind=${cur%%:*} rest=${cur#*:}
    tfs=$(_bpfkit_tracefs) || return
    case $kind in
        tracepoint|t)
            if [[ $rest != *:* ]]; then
                _bpfkit_dirs_in "$tfs/events" "$rest" | sed "s/^/$kind:/; s/\$/:/"
            else
                group=${rest%%:*}
                _bpfkit_dirs_in "$tfs/events/$group" "${rest#*:}" | sed "s/^/$kind:$group:/"
            fi ;;
        rawtracepoint|rt)
            # Tracepoints by name; the syscalls group's events are ftrace events, not
            # tracepoints (their raw tracepoints are raw_syscalls' sys_enter/sys_exit).
            local g
            for g in "$tfs"/events/*/; do
                [[ $g == */syscalls/ ]] || _bpfkit_dirs_in "$g" "$rest"
            done | sort -u | sed "s/^/$kind:/" ;;
        kprobe|kretprobe|k|kr|kprobe.session|fentry|fexit|f|fr)
            # tracefs' available_filter_functions (CONFIG_DYNAMIC_FTRACE), else /proc/kallsyms'
            # text symbols (the file can refuse to be read: EPERM on a kernel without kprobes).
            { awk -v p="$rest" -v k="$kind:" 'index($1, p) == 1 { print k $1 }' "$tfs/available_filter_functions" 2>/dev/null ||
              awk -v p="$rest" -v k="$kind:" '$2 ~ /^[tT]$/ && index($3, p) == 1 { print k $3 }' /proc/kallsyms 2>/dev/null; } | sort -u ;;
    esac
}

_bpfkit_kinds() {  # the caller's `kinds`: the positionals' kinds of command path $1 (tab-separated)
    local IFS=$'\t'
    set -f; kinds=( ${_bpfkit_positionals[$1]} ); set +f
}

_bpfkit_values() {  # _bpfkit_values KIND CUR OBJECT: candidates, one a line
    local kind=$1 cur=$2 obj=$3
    case $kind in
        words:*) _bpfkit_words "$cur" ${kind#words:} ;;
        object) _bpfkit_paths "$cur" '*.o' ;;
        program) [[ -n $obj ]] && _bpfkit_words "$cur" $(bpfkit completion --programs "$obj" 2>/dev/null) ;;
        map) [[ -n $obj ]] && _bpfkit_words "$cur" $(bpfkit completion --maps "$obj" 2>/dev/null) ;;
        bpffs)
            if [[ -z $cur || /sys/fs/bpf/ == "$cur"* ]] && [[ $cur != /sys/fs/bpf/* ]]; then
                printf '%s\n' /sys/fs/bpf/
            else
                _bpfkit_paths "$cur"
            fi ;;
        probe) _bpfkit_probe "$cur" ;;
        dir) _bpfkit_paths "$cur" / ;;  # '/': no file name matches, directories only
        file) _bpfkit_paths "$cur" ;;
    esac
}

_bpfkit() {
    local line=${COMP_LINE:0:${COMP_POINT:-${#COMP_LINE}}}
    local -a line_words
    if [[ -n $COMP_LINE ]]; then
        local IFS=$' \t\n'
        set -f; line_words=( $line ); set +f
        [[ $line =~ [[:space:]]$ ]] && line_words+=( "" )
    else
        line_words=( "${COMP_WORDS[@]:0:COMP_CWORD+1}" )
    fi
    # (Keys with a blank go through $key: zsh keeps the quotes of ${a["x y"]} inside "...".)
    local cur=${line_words[${#line_words[@]}-1]} cmdpath=bpfkit obj="" npos=0 i w kind key
    local -a kinds
    for (( i = 1; i < ${#line_words[@]} - 1; i++ )); do
        w=${line_words[i]}
        if [[ $w == --* && $w == *=* ]]; then
            continue
        elif [[ $w == -* ]]; then
            key="$cmdpath $w"
            [[ -n ${_bpfkit_option_kinds[$key]+x} ]] && (( i++ ))
            continue
        fi
        if (( npos == 0 )) && [[ " ${_bpfkit_commands[$cmdpath]} " == *" $w "* ]]; then
            cmdpath="$cmdpath $w"
            continue
        fi
        _bpfkit_kinds "$cmdpath"
        kind=${kinds[npos]:-}
        (( npos >= ${#kinds[@]} && ${#kinds[@]} > 0 )) && kind=${kinds[${#kinds[@]}-1]}
        [[ ${kind%\*} == object ]] && obj=$w
        (( npos++ ))
    done
    local prev=${line_words[${#line_words[@]}-2]} out="" prev_key="$cmdpath ${line_words[${#line_words[@]}-2]}" eq_key="$cmdpath ${cur%%=*}"
    if (( ${#line_words[@]} > 2 )) && [[ $prev == -* && -n ${_bpfkit_option_kinds[$prev_key]+x} ]]; then
        out=$(_bpfkit_values "${_bpfkit_option_kinds[$prev_key]}" "$cur" "$obj")
    elif [[ $cur == --*=* && -n ${_bpfkit_option_kinds[$eq_key]+x} ]]; then
        out=$(_bpfkit_values "${_bpfkit_option_kinds[$eq_key]}" "${cur#*=}" "$obj" | sed "s|^|${cur%%=*}=|")
    elif [[ $cur == -* ]]; then
        out=$(_bpfkit_words "$cur" ${_bpfkit_options[$cmdpath]})
    elif [[ -n ${_bpfkit_commands[$cmdpath]+x} ]] && (( npos == 0 )); then
        out=$(_bpfkit_words "$cur" ${_bpfkit_commands[$cmdpath]})
    else
        _bpfkit_kinds "$cmdpath"
        if (( npos < ${#kinds[@]} )); then
            kind=${kinds[npos]}
        elif (( ${#kinds[@]} == 0 )); then
            kind=none
        else
            kind=${kinds[${#kinds[@]}-1]}
            [[ $kind == *\* ]] || kind=none
        fi
        [[ -n $kind ]] && out=$(_bpfkit_values "${kind%\*}" "$cur" "$obj")
    fi
    COMPREPLY=()
    local c trim=""
    # bash replaces only the part of the word after its last ':' or '=' (COMP_WORDBREAKS);
    # zsh (no COMP_WORDBREAKS) the whole word.
    if [[ $COMP_WORDBREAKS == *:* && $cur == *[:=]* ]]; then
        trim=${cur%"${cur##*[:=]}"}
    fi
    while IFS= read -r c; do
        [[ -n $c ]] && COMPREPLY+=( "${c#"$trim"}" )
    done <<< "$out"
    # Do not add a space after a directory, a bpffs prefix or a probe kind/group still going on.
    if [[ ${COMPREPLY[*]} == */ || ${COMPREPLY[*]} == *:  || ${COMPREPLY[*]} == *": "* || ${COMPREPLY[*]} == *"/ "* ]]; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}
complete -F _bpfkit bpfkit
'''
