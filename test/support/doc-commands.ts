// Shell commands as a reader copies them from the docs: the lines of ```sh blocks, a command continued over
// lines ending in `\`, comments and blank lines left out.

export interface DocCommand {
  /** Exactly as written, continuation lines included: what a reader pastes into a shell. */
  text: string;
  /** On one line, runs of blanks collapsed: for matching and comparing. */
  flat: string;
}

export function shellCommands(markdown: string): DocCommand[] {
  const out: DocCommand[] = [];
  for (const block of markdown.matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    let lines: string[] = [];
    for (const line of block[1]!.split('\n')) {
      if (lines.length === 0 && (line.trim() === '' || line.trim().startsWith('#'))) continue;
      lines.push(line);
      if (line.endsWith('\\')) continue;
      const text = lines.join('\n');
      out.push({ text, flat: text.replace(/\\\n/g, ' ').replace(/\s+/g, ' ').trim() });
      lines = [];
    }
    if (lines.length > 0) throw new Error(`a command ends in a continuation: ${lines.join('\n')}`);
  }
  return out;
}

/** The text under a heading, up to the next heading of the same or a higher level. */
export function section(markdown: string, heading: string): string {
  const level = /^#+/.exec(heading)?.[0].length ?? 0;
  const start = markdown.split('\n').findIndex((l) => l.trim() === heading);
  if (level === 0 || start < 0) throw new Error(`no heading ${heading}`);
  const lines = markdown.split('\n').slice(start + 1);
  const end = lines.findIndex((l) => {
    const m = /^(#+) /.exec(l);
    return m !== null && m[1]!.length <= level;
  });
  return (end < 0 ? lines : lines.slice(0, end)).join('\n');
}

/** Splits concatenated JSON documents (buf curl prints one pretty-printed document per stream message). */
export function jsonDocuments(text: string): { docs: unknown[]; rest: string } {
  const docs: unknown[] = [];
  let depth = 0;
  let inString = false;
  let escaped = false;
  let start = -1;
  let consumed = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') {
      if (depth === 0) start = i;
      depth++;
    } else if (c === '}' || c === ']') {
      depth--;
      if (depth === 0) {
        docs.push(JSON.parse(text.slice(start, i + 1)));
        consumed = i + 1;
      }
    }
  }
  return { docs, rest: text.slice(consumed) };
}
