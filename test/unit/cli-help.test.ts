import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';

function leaves(cmd: Command, path: string[] = []): [string, Command][] {
  if (cmd.commands.length === 0) return [[path.join(' '), cmd]];
  return cmd.commands.flatMap((c) => leaves(c, [...path, c.name()]));
}

describe('cli help', () => {
  it('every command has a description and examples in its --help', () => {
    for (const [path, cmd] of leaves(buildProgram())) {
      let out = '';
      cmd.configureOutput({ writeOut: (s) => (out += s), writeErr: (s) => (out += s) });
      cmd.outputHelp();
      expect(cmd.description(), path).not.toBe('');
      expect(out, path).toMatch(/Examples:\n {2}\S/);
    }
  });
});
