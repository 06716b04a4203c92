#!/usr/bin/env node
// Installs what `npm start` and `npm test` need and is missing, on a fresh clone of a fresh machine
// (Node 20, npm, Java, apt). Plain Node with no dependencies: it runs before anything is installed.
//
//  1. npm dependencies, from the lock file, when node_modules is missing or older than the lock file;
//     the native bindings (better-sqlite3, zstd-napi) are rebuilt if they do not load; the project's
//     own native merge (native/) is built when missing or older than its source.
//  2. ZooKeeper, unless EXC_ZK names an existing server: the Debian/Ubuntu package `zookeeper`
//     (/usr/share/java/zookeeper.jar), installed with apt-get when we are root; otherwise stop and say
//     exactly what to install.
//  3. Chromium, for the monitor page's browser test: Debian's package `chromium` (/usr/bin/chromium),
//     installed with apt-get when we are root. The test drives it with playwright-core, which never
//     downloads a browser of its own. Not needed by `npm start`: a machine without it only says so.
//  4. PostgreSQL, for the metadata store's tests on PostgreSQL (and `npm start -- --postgres`): Debian's
//     package `postgresql` (/usr/lib/postgresql/<version>/bin/postgres), installed with apt-get when we
//     are root. The tests start their own server from it; the package's own cluster is not used.
// With --native, step 1 only (the merge benchmark runs that, so that a fresh clone measures the merge
// compactions run, not the JavaScript fallback).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const ZK_JAR = process.env.EXC_ZK_JAR || '/usr/share/java/zookeeper.jar';
const quiet = process.argv.includes('--quiet');

function say(message) {
  if (!quiet) console.error(`[setup] ${message}`);
}

function fail(message) {
  console.error(`[setup] cannot continue: ${message}`);
  process.exit(1);
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', ...options });
  if (result.error) fail(`${command} ${args.join(' ')}: ${result.error.message}`);
  return result.status === 0;
}

function checkNode() {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 20) fail(`Node ${process.versions.node} is too old; excompact needs Node 20 or newer`);
}

function npmDependenciesStale() {
  const marker = join(root, 'node_modules', '.package-lock.json');
  if (!existsSync(marker)) return 'node_modules is missing';
  const lock = join(root, 'package-lock.json');
  if (existsSync(lock) && statSync(lock).mtimeMs > statSync(marker).mtimeMs + 1000) {
    return 'package-lock.json changed since the last install';
  }
  return undefined;
}

// The packages that compile native code at install time (node-gyp), each with a line that loads and
// uses it. npm leaves such a package without its binary when the build could not run (no compiler then,
// or an install with scripts turned off).
const NATIVE = {
  'better-sqlite3': "const D=require('better-sqlite3'); new D(':memory:').close()",
  'zstd-napi': "const z=require('zstd-napi'); z.decompress(z.compress(Buffer.from('x')))",
};

function nativeBindingLoads(name) {
  const result = spawnSync(process.execPath, ['-e', NATIVE[name]], { cwd: root, stdio: 'ignore' });
  return result.status === 0;
}

// node-gyp builds native modules against Node's headers and downloads them from nodejs.org unless told
// where they are. Installed Node ships them (<prefix>/include/node): point npm at those, so the build works
// on machines that reach the npm registry and nothing else.
function npmEnv() {
  const env = { ...process.env };
  const prefix = join(dirname(process.execPath), '..');
  if (!env.npm_config_nodedir && existsSync(join(prefix, 'include', 'node', 'node.h'))) {
    env.npm_config_nodedir = prefix;
  }
  return env;
}

function ensureNpmDependencies() {
  const why = npmDependenciesStale();
  if (why) {
    say(`installing npm dependencies (${why})`);
    // `npm install` honours the versions pinned in package-lock.json. Not `npm ci`: some registries (and
    // mirrors) lack other platforms' builds of optional packages, npm then leaves them out of the lock
    // file, and `npm ci` refuses a lock file with missing optional entries.
    const ok = run('npm', ['install', '--no-audit', '--no-fund'], { env: npmEnv() });
    if (!ok) fail('npm could not install the dependencies (see the output above)');
  }
  for (const name of Object.keys(NATIVE)) {
    if (nativeBindingLoads(name)) continue;
    say(`building the native binding of ${name}`);
    if (!run('npm', ['rebuild', name], { env: npmEnv() }) || !nativeBindingLoads(name)) {
      fail(
        `${name} does not load; it needs python3, make and g++ to build (apt-get install python3 make g++)`,
      );
    }
  }
  // Make sure the modules the project resolves at run time are really there.
  const require = createRequire(join(root, 'package.json'));
  for (const name of [
    'node-zookeeper-client',
    'express',
    'pino',
    'zod',
    'lz4-napi',
    'zstd-napi',
    '@node-rs/crc32',
  ]) {
    try {
      require.resolve(name);
    } catch {
      fail(`npm dependency ${name} is missing after install; remove node_modules and run again`);
    }
  }
}

// The project's own native code (native/merge.c: the compaction merge), built with the node-gyp that
// comes with npm, against the same headers. Rebuilt when its sources are newer than the binary. Not
// fatal when it cannot be built: compactions then run the JavaScript merge, which gives the same files.
const NATIVE_DIR = join(root, 'native');
const NATIVE_BINARY = join(NATIVE_DIR, 'build', 'Release', 'excompact_merge.node');

function nodeGyp() {
  const candidates = [
    process.env.npm_execpath && join(dirname(process.env.npm_execpath), '..', 'node_modules', 'node-gyp'),
    join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp'),
  ];
  for (const dir of candidates) {
    if (dir && existsSync(join(dir, 'bin', 'node-gyp.js'))) return join(dir, 'bin', 'node-gyp.js');
  }
  return null;
}

function ensureNativeMerge() {
  const sources = ['merge.c', 'binding.gyp'].map((f) => statSync(join(NATIVE_DIR, f)).mtimeMs);
  if (existsSync(NATIVE_BINARY) && statSync(NATIVE_BINARY).mtimeMs >= Math.max(...sources)) return;
  const gyp = nodeGyp();
  if (!gyp) {
    say('node-gyp not found next to npm: compactions will use the JavaScript merge');
    return;
  }
  say('building the native merge (native/merge.c)');
  const result = spawnSync(process.execPath, [gyp, 'rebuild', '--loglevel=warn'], {
    cwd: NATIVE_DIR,
    env: npmEnv(),
    encoding: 'utf8',
  });
  if (result.status !== 0 || !existsSync(NATIVE_BINARY)) {
    console.error(`${result.stdout ?? ''}${result.stderr ?? ''}`.trim());
    say('the native merge did not build (above): compactions will use the JavaScript merge');
  }
}

/** Whether we may install Debian packages: root, with apt-get. */
function canApt() {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  return isRoot && spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Installs Debian's `pkg` (updating the package lists first) and checks that `file` came with it. */
function aptInstall(pkg, file) {
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (!run('apt-get', ['update', '-qq'], { env })) fail('apt-get update failed (see the output above)');
  if (!run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', pkg], { env })) {
    fail(`apt-get install ${pkg} failed (see the output above)`);
  }
  if (!existsSync(file)) fail(`the ${pkg} package is installed but ${file} is missing`);
}

function javaWorks() {
  return spawnSync('java', ['-version'], { stdio: 'ignore' }).status === 0;
}

function ensureZooKeeper() {
  if (process.env.EXC_ZK) {
    say(`using the ZooKeeper at EXC_ZK=${process.env.EXC_ZK}`);
    return;
  }
  if (!existsSync(ZK_JAR)) {
    if (!canApt()) {
      fail(
        `ZooKeeper is not installed (no ${ZK_JAR}). Install it with:\n` +
          `    sudo apt-get update && sudo apt-get install -y zookeeper\n` +
          `  or point EXC_ZK_JAR at a zookeeper jar, or set EXC_ZK to the connect string of a running server.`,
      );
    }
    say('installing ZooKeeper with apt-get (package zookeeper)');
    aptInstall('zookeeper', ZK_JAR);
  }
  if (!javaWorks()) {
    fail('java is not on the PATH; ZooKeeper needs a Java runtime (apt-get install default-jre-headless)');
  }
}

const CHROMIUM = process.env.EXC_CHROMIUM || '/usr/bin/chromium';

function ensureChromium() {
  if (existsSync(CHROMIUM)) return;
  if (!canApt()) {
    say(
      `Chromium is not installed (no ${CHROMIUM}); the monitor's browser test needs it:\n` +
        `    sudo apt-get update && sudo apt-get install -y chromium   (or set EXC_CHROMIUM)`,
    );
    return;
  }
  say('installing Chromium with apt-get (package chromium), for the monitor page test');
  aptInstall('chromium', CHROMIUM);
}

/** Whether a PostgreSQL server program is installed (EXC_PG_BIN, or Debian's layout). */
function postgresInstalled() {
  if (process.env.EXC_PG_BIN) return existsSync(join(process.env.EXC_PG_BIN, 'postgres'));
  const base = '/usr/lib/postgresql';
  return existsSync(base) && readdirSync(base).some((v) => existsSync(join(base, v, 'bin', 'postgres')));
}

function ensurePostgres() {
  if (postgresInstalled()) return;
  if (!canApt()) {
    say(
      'PostgreSQL is not installed; the metadata store tests on PostgreSQL need it:\n' +
        '    sudo apt-get update && sudo apt-get install -y postgresql   (or set EXC_PG_BIN)',
    );
    return;
  }
  say('installing PostgreSQL with apt-get (package postgresql), for the metadata store on PostgreSQL');
  aptInstall('postgresql', '/usr/lib/postgresql');
}

checkNode();
ensureNpmDependencies();
ensureNativeMerge();
if (process.argv.includes('--native')) {
  // What the benchmarks need (bench/merge.ts runs this): the dependencies and the native code.
  say('ready (native code)');
  process.exit(0);
}
ensureZooKeeper();
ensureChromium();
ensurePostgres();
say('ready');
