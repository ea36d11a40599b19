#!/usr/bin/env node
// The longest functions of brim's sources, by lines (declarations, methods, function expressions and
// arrows, nested ones counted on their own too), longest first: the check of issue 25's "no function
// over 120 lines". Exits 1 when one is over --max.
// Usage: node scripts/function-lengths.mjs [--max 120] [--top 10] [files…]   (default: git ls-files 'src/*.ts')
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import ts from "typescript";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const value = Number(args[i + 1]);
  args.splice(i, 2);
  return value;
};
const max = option("--max", 120);
const top = option("--top", 10);
const files = args.length > 0 ? args : execFileSync("git", ["ls-files", "src/*.ts"], { encoding: "utf8" }).split("\n").filter(Boolean);

const lengths = [];
for (const file of files) {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const line = (pos) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const visit = (node) => {
    if (ts.isFunctionDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node) || ts.isMethodDeclaration(node)) {
      const name = node.name?.getText(source) ?? (ts.isVariableDeclaration(node.parent) ? node.parent.name.getText(source) : "(anonymous)");
      const start = line(node.getStart(source));
      lengths.push({ lines: line(node.getEnd()) - start + 1, where: `${file}:${start}`, name });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}
lengths.sort((a, b) => b.lines - a.lines);
for (const f of lengths.slice(0, top)) console.log(`${String(f.lines).padStart(5)}  ${f.name}  ${f.where}`);
const over = lengths.filter((f) => f.lines > max);
console.log(over.length === 0 ? `no function over ${max} lines` : `${over.length} function(s) over ${max} lines`);
process.exitCode = over.length === 0 ? 0 : 1;
