/**
 * `brim completion bash|zsh|fish`: shell completion generated from the program's own command tree, so
 * it always lists the commands and options this brim has.
 *
 * @module
 */
import { Argument, type Command } from "commander";
import { UsageError } from "../errors/index.ts";
import type { Output } from "./output.ts";

/** The shells brim writes completion for. */
export const SHELLS = ["bash", "zsh", "fish"] as const;
/** One of {@link SHELLS}. */
export type Shell = (typeof SHELLS)[number];

/** A command as completion sees it. */
export interface CompletionCommand {
  name: string;
  summary: string;
  /** Long and short flags, e.g. `--cap`, `-h`. */
  options: { flags: string[]; description: string; takesValue: boolean }[];
  /** Nested commands (e.g. `brim apply` under none; kept general). */
  commands: CompletionCommand[];
}

/**
 * The command tree of `program` for completion.
 *
 * @example
 * ```ts
 * completionTree(program).commands.map((c) => c.name); // ["plan", "detect", "run", ...]
 * ```
 */
export function completionTree(program: Command): CompletionCommand {
  const walk = (cmd: Command): CompletionCommand => ({
    name: cmd.name(),
    summary: cmd.summary() || cmd.description().split("\n")[0] || "",
    options: [
      ...cmd.options
        .filter((o) => !o.hidden)
        .map((o) => ({
          flags: [o.long, o.short].filter((f): f is string => f !== undefined),
          description: o.description,
          takesValue: o.required || o.optional,
        })),
      { flags: ["--help", "-h"], description: "display help for command", takesValue: false },
    ],
    commands: cmd.commands.filter((c) => !(c as Command & { _hidden?: boolean })._hidden).map(walk),
  });
  return walk(program);
}

const words = (list: string[]): string => list.join(" ");
const quote = (text: string): string => `'${text.replace(/'/g, `'\\''`)}'`;

function bash(tree: CompletionCommand): string {
  const cases = tree.commands
    .map((c) => `    ${c.name}) opts=${quote(words([...c.options.flatMap((o) => o.flags), ...c.commands.map((s) => s.name)]))} ;;`)
    .join("\n");
  return `# brim completion for bash: eval "$(brim completion bash)" in ~/.bashrc
_brim_complete() {
  local cur cmd opts i
  cur="\${COMP_WORDS[COMP_CWORD]}"
  cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    # after -- the words are the job's own: leave them to the default completion
    [[ "\${COMP_WORDS[i]}" == "--" ]] && return 0
    [[ -z "$cmd" && "\${COMP_WORDS[i]}" != -* ]] && cmd="\${COMP_WORDS[i]}"
  done
  case "$cmd" in
    "") opts=${quote(words([...tree.commands.map((c) => c.name), ...tree.options.flatMap((o) => o.flags)]))} ;;
${cases}
    *) opts="" ;;
  esac
  if [[ "$cur" == -* || -z "$cmd" ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o default -F _brim_complete brim
`;
}

function zsh(tree: CompletionCommand): string {
  const describe = (text: string): string =>
    text
      .replace(/[[\]:'\\]/g, " ")
      .replace(/\s+/g, " ")
      .trim();
  const commands = tree.commands.map((c) => `    ${quote(`${c.name}:${describe(c.summary)}`)}`).join("\n");
  const cases = tree.commands
    .map((c) => {
      const specs = c.options.map((o) => {
        const spec = `${describe(o.description)}]${o.takesValue ? ":value:_files" : ""}`;
        // '(--x -x)'{--x,-x}'[what]': the braces expand outside the quotes into both flags
        return o.flags.length > 1 ? `    '(${o.flags.join(" ")})'{${o.flags.join(",")}}'[${spec}'` : `    '${o.flags[0] ?? ""}[${spec}'`;
      });
      return `  (${c.name})\n    _arguments -s \\\n${specs.join(" \\\n")} \\\n    '*:file:_files' ;;`;
    })
    .join("\n");
  return `#compdef brim
# brim completion for zsh: eval "$(brim completion zsh)" in ~/.zshrc (after compinit)
_brim() {
  local -a commands
  commands=(
${commands}
  )
  if (( CURRENT == 2 )); then
    _describe 'brim command' commands
    return
  fi
  local cmd=\${words[2]}
  shift words
  (( CURRENT-- ))
  case $cmd in
${cases}
  esac
}
compdef _brim brim
`;
}

function fish(tree: CompletionCommand): string {
  const lines = ["# brim completion for fish: brim completion fish > ~/.config/fish/completions/brim.fish", "complete -c brim -f"];
  for (const c of tree.commands) lines.push(`complete -c brim -n __fish_use_subcommand -a ${c.name} -d ${quote(c.summary)}`);
  for (const c of tree.commands) {
    for (const o of c.options) {
      const long = o.flags.find((f) => f.startsWith("--"))?.slice(2);
      const short = o.flags.find((f) => /^-[^-]/.test(f))?.slice(1);
      lines.push(
        `complete -c brim -n ${quote(`__fish_seen_subcommand_from ${c.name}`)}${long !== undefined ? ` -l ${long}` : ""}${short !== undefined ? ` -s ${short}` : ""}${o.takesValue ? " -r -F" : ""} -d ${quote(o.description)}`,
      );
    }
    lines.push(`complete -c brim -n ${quote(`__fish_seen_subcommand_from ${c.name}`)} -F`);
  }
  return `${lines.join("\n")}\n`;
}

/**
 * The completion script for `shell`.
 *
 * @example
 * ```ts
 * completionScript(program, "fish"); // "...complete -c brim -n __fish_use_subcommand -a run ..."
 * ```
 */
export function completionScript(program: Command, shell: Shell): string {
  const tree = completionTree(program);
  return shell === "bash" ? bash(tree) : shell === "zsh" ? zsh(tree) : fish(tree);
}

/**
 * Adds `brim completion <shell>` to the program (register it last: it reads the commands before it).
 *
 * @example
 * ```ts
 * registerCompletion(program, processOutput);
 * ```
 */
export function registerCompletion(program: Command, out: Output): void {
  program
    .command("completion")
    .summary("print a shell completion script (bash, zsh or fish)")
    .addArgument(new Argument("<shell>", "the shell").choices(SHELLS))
    .addHelpText(
      "after",
      `
Examples:
  eval "$(brim completion bash)"                            # in ~/.bashrc
  eval "$(brim completion zsh)"                             # in ~/.zshrc, after compinit
  brim completion fish > ~/.config/fish/completions/brim.fish`,
    )
    .action((shell: string) => {
      if (!(SHELLS as readonly string[]).includes(shell)) throw new UsageError(`unknown shell '${shell}': one of ${SHELLS.join(", ")}`);
      out.stdout(completionScript(program, shell as Shell));
    });
}
