/**
 * Runs once before all suites: integration tests spawn the compiled CLI (dist/), so build it when it is
 * missing (`npm test` has already built it; a bare `npx vitest` may not have).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  if (!existsSync(fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url)))) {
    execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
  }
}
