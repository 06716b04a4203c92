/**
 * Runs once before all suites: integration tests spawn the compiled CLI (dist/) and its bundle
 * (dist/bundle/), so build them when they are missing (`npm test` has already built them; a bare
 * `npx vitest` may not have).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const built = ['../../dist/cli/main.js', '../../dist/bundle/main.js'].every((f) =>
    existsSync(fileURLToPath(new URL(f, import.meta.url))),
  );
  if (!built) execFileSync('npm', ['run', 'build', '--silent'], { stdio: 'inherit' });
}
