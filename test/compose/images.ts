/**
 * The images the compose test runs, built from Debian's mirror and npm alone (no registry can be pulled
 * from here) and cached in the daemon under tags named by the hash of what went into them:
 *
 * - base: Debian bookworm (debootstrap --variant=minbase) with this machine's Node 20, npm, Node's headers
 *   and CA bundle — the local stand-in for node:20-bookworm-slim;
 * - zookeeper: Debian's zookeeper package on the base (images/zookeeper);
 * - s3: s3rver on the base (images/s3rver), standing in for the compose file's S3 server;
 * - postgres: Debian's postgresql package on the base (images/postgres), for the `postgres` profile;
 * - excompact: the project image; by default the runtime stage with this machine's dist/ and production
 *   node_modules (images/excompact), with `full` the repository's own Dockerfile built from source.
 */
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ComposeTestError, pipe, run, say } from './run.js';

export interface Images {
  base: string;
  zookeeper: string;
  s3: string;
  postgres: string;
  excompact: string;
}

/** Bump to rebuild every image (a change of how images are made that the hashed inputs do not show). */
const RECIPE = 'excompact-compose-test/1';
const build = { ...process.env, DOCKER_BUILDKIT: '0' };

class Hasher {
  private readonly hash = createHash('sha256').update(RECIPE);
  text(value: string): this {
    this.hash.update(`${value}\0`);
    return this;
  }
  /** A file's contents, or every file under a directory in name order. */
  path(path: string): this {
    const stat = statSync(path);
    if (stat.isDirectory()) {
      for (const name of readdirSync(path).sort()) this.path(join(path, name));
    } else {
      this.text(path);
      this.hash.update(readFileSync(path));
    }
    return this;
  }
  tag(name: string): string {
    return `excompact-test/${name}:${this.hash.digest('hex').slice(0, 16)}`;
  }
}

async function exists(tag: string): Promise<boolean> {
  return (
    (await run('docker', ['image', 'inspect', '--format', '{{.Id}}', tag], { allowFailure: true })).code === 0
  );
}

/** The Debian mirror apt uses here (debootstrap must reach the same one). */
export function debianMirror(): string {
  const files = [
    '/etc/apt/sources.list',
    ...listDir('/etc/apt/sources.list.d').map((f) => `/etc/apt/sources.list.d/${f}`),
  ];
  for (const file of files) {
    if (!existsSync(file) || !/\.(list|sources)$|sources\.list$/.test(file)) continue;
    const text = readFileSync(file, 'utf8');
    const deb = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+bookworm\s/m.exec(text);
    if (deb?.[1]) return deb[1];
    const uris = /^URIs:\s*(\S+)/m.exec(text);
    if (uris?.[1] && /^Suites:.*\bbookworm\b/m.test(text) && !uris[1].includes('security')) return uris[1];
  }
  return 'http://deb.debian.org/debian';
}

function listDir(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir) : [];
}

/** This machine's Node: its binary, npm's directory and the headers native modules build against. */
function hostNode(): { binary: string; npm: string; headers: string; ca: string } {
  const binary = realpathSync(process.execPath);
  const prefix = dirname(dirname(binary));
  const npm = [
    join(prefix, 'lib/node_modules/npm'),
    '/usr/lib/node_modules/npm',
    '/usr/local/lib/node_modules/npm',
  ].find((p) => existsSync(join(p, 'package.json')));
  const headers = [join(prefix, 'include/node'), '/usr/include/node'].find((p) =>
    existsSync(join(p, 'node.h')),
  );
  const ca = process.env.NODE_EXTRA_CA_CERTS ?? '/etc/ssl/certs/ca-certificates.crt';
  if (!npm || !headers || !existsSync(ca))
    throw new ComposeTestError(
      'SETUP',
      `this machine's Node needs npm, its headers (include/node) and a CA bundle (${ca})`,
    );
  if (!process.version.startsWith('v20.'))
    throw new ComposeTestError(
      'SETUP',
      `the stand-in base needs Node 20 on this machine, not ${process.version}`,
    );
  return { binary, npm, headers, ca };
}

async function buildBase(): Promise<string> {
  const node = hostNode();
  const mirror = debianMirror();
  const tag = new Hasher()
    .text(`debootstrap --variant=minbase bookworm ${mirror}`)
    .path(node.binary)
    .path(join(node.npm, 'package.json'))
    .path(join(node.headers, 'node_version.h'))
    .path(node.ca)
    .tag('base');
  if (await exists(tag)) return tag;
  if (typeof process.getuid === 'function' && process.getuid() !== 0)
    throw new ComposeTestError(
      'UNAVAILABLE',
      `building the base image ${tag} needs root (debootstrap, chroot)`,
    );
  say(`building the base image ${tag}: debootstrap bookworm from ${mirror}, Node ${process.version}`);
  const work = mkdtempSync(join(tmpdir(), 'excompact-base-'));
  try {
    const root = join(work, 'rootfs');
    await run('debootstrap', ['--variant=minbase', 'bookworm', root, mirror], { timeoutMs: 900_000 });
    cpSync(node.binary, join(root, 'usr/local/bin/node'));
    cpSync(node.npm, join(root, 'usr/local/lib/node_modules/npm'), { recursive: true });
    cpSync(node.headers, join(root, 'usr/local/include/node'), { recursive: true });
    mkdirSync(join(root, 'etc/ssl/certs'), { recursive: true });
    cpSync(node.ca, join(root, 'etc/ssl/certs/ca-certificates.crt'));
    const inRoot = (script: string) => run('chroot', [root, '/bin/sh', '-c', script]);
    await inRoot(
      'ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm' +
        ' && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx' +
        ' && groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node' +
        ' && apt-get clean && rm -rf /var/lib/apt/lists/*',
    );
    const changes = [
      'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      // The CA bundle of this machine: npm inside a build goes through the same TLS interception.
      'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt',
      'ENV npm_config_cafile=/etc/ssl/certs/ca-certificates.crt',
      // Native modules (better-sqlite3) build against these headers: no header download needed.
      'ENV npm_config_nodedir=/usr/local',
      'CMD ["node"]',
    ].flatMap((c) => ['--change', c]);
    await pipe(['tar', ['-C', root, '-c', '.']], ['docker', ['import', ...changes, '-', tag]], 600_000);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return tag;
}

async function dockerBuild(
  tag: string,
  context: string,
  base: string,
  args: Record<string, string> = {},
): Promise<void> {
  const buildArgs = Object.entries({ BASE: base, ...args }).flatMap(([k, v]) => ['--build-arg', `${k}=${v}`]);
  await run('docker', ['build', '--force-rm', '--network', 'host', ...buildArgs, '-t', tag, context], {
    env: build,
    timeoutMs: 900_000,
  }).catch((err: Error) => {
    throw new ComposeTestError('BUILD', `${tag}: ${err.message}`);
  });
}

/** A temporary build context assembled from `entries` (destination → source). */
function context(entries: Record<string, string>, prepare?: (dir: string) => Promise<void>) {
  return async <T>(use: (dir: string) => Promise<T>): Promise<T> => {
    const dir = mkdtempSync(join(tmpdir(), 'excompact-context-'));
    try {
      for (const [to, from] of Object.entries(entries)) cpSync(from, join(dir, to), { recursive: true });
      await prepare?.(dir);
      return await use(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

/** Builds (or finds) every image; `full` builds the project image with the repository's Dockerfile. */
export async function buildImages(root: string, full: boolean): Promise<Images> {
  const at = (p: string) => join(root, p);
  const base = await buildBase();

  const zkDir = at('test/compose/images/zookeeper');
  const zookeeper = new Hasher().text(base).path(zkDir).tag('zookeeper');
  if (!(await exists(zookeeper))) {
    say(`building ${zookeeper} (Debian's zookeeper package)`);
    await dockerBuild(zookeeper, zkDir, base);
  }

  const pgDir = at('test/compose/images/postgres');
  const postgres = new Hasher().text(base).path(pgDir).tag('postgres');
  if (!(await exists(postgres))) {
    say(`building ${postgres} (Debian's postgresql package)`);
    await dockerBuild(postgres, pgDir, base);
  }

  const lock = JSON.parse(readFileSync(at('package-lock.json'), 'utf8')) as {
    packages: Record<string, { version: string }>;
  };
  const s3rverVersion = lock.packages['node_modules/s3rver']?.version;
  if (!s3rverVersion) throw new ComposeTestError('SETUP', 'package-lock.json has no s3rver');
  const s3Dir = at('test/compose/images/s3rver');
  const s3 = new Hasher()
    .text(base)
    .text(s3rverVersion)
    .path(s3Dir)
    .path(at('scripts/s3rver.cjs'))
    .tag('s3rver');
  if (!(await exists(s3))) {
    say(`building ${s3} (s3rver ${s3rverVersion})`);
    const entries = {
      Dockerfile: join(s3Dir, 'Dockerfile'),
      'credentials.cjs': join(s3Dir, 'credentials.cjs'),
      's3rver.cjs': at('scripts/s3rver.cjs'),
    };
    await context(entries)((dir) => dockerBuild(s3, dir, base, { S3RVER_VERSION: s3rverVersion }));
  }

  let excompact: string;
  if (full) {
    const hash = new Hasher().text(base).text('full');
    for (const p of [
      'Dockerfile',
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
      'src',
      'bin',
      'scripts/bundle.mjs',
      'native/merge.c',
      'native/binding.gyp',
      'web',
    ])
      hash.path(at(p));
    excompact = hash.tag('excompact');
    if (!(await exists(excompact))) {
      say(`building ${excompact} with the repository's Dockerfile (npm install, native build, tsc)`);
      await dockerBuild(excompact, root, base);
    }
  } else {
    const sqlite = at('node_modules/better-sqlite3/build/Release/better_sqlite3.node');
    const zstd = at('node_modules/zstd-napi/build/Release/binding.node');
    const merge = at('native/build/Release/excompact_merge.node');
    if (!existsSync(at('dist/cli/main.js')) || !existsSync(sqlite) || !existsSync(zstd) || !existsSync(merge))
      throw new ComposeTestError('SETUP', 'build the project first: npm run setup && npm run build');
    const imageDir = at('test/compose/images/excompact');
    excompact = new Hasher()
      .text(base)
      .path(imageDir)
      .path(at('dist'))
      .path(at('bin'))
      .path(at('web'))
      .path(at('package.json'))
      .path(at('package-lock.json'))
      .path(sqlite)
      .path(zstd)
      .path(merge)
      .tag('excompact');
    if (!(await exists(excompact))) {
      say(`building ${excompact} from this machine's dist/ and production node_modules`);
      const entries = {
        Dockerfile: join(imageDir, 'Dockerfile'),
        dist: at('dist'),
        'native/build/Release/excompact_merge.node': merge,
        bin: at('bin'),
        web: at('web'),
        'package.json': at('package.json'),
        'package-lock.json': at('package-lock.json'),
      };
      // node_modules: hard links of this machine's, pruned to the production dependencies by npm itself.
      await context(entries, async (dir) => {
        const linked = await run('cp', ['-al', at('node_modules'), join(dir, 'node_modules')], {
          allowFailure: true,
        });
        if (linked.code !== 0) {
          // Another file system than the temporary directory's: copy instead.
          rmSync(join(dir, 'node_modules'), { recursive: true, force: true });
          await run('cp', ['-a', at('node_modules'), join(dir, 'node_modules')]);
        }
        // npm rewrites its hidden lock file: unlink it first so that the write cannot reach ours.
        rmSync(join(dir, 'node_modules/.package-lock.json'), { force: true });
        await run(
          'npm',
          ['prune', '--omit=dev', '--offline', '--no-audit', '--no-fund', '--ignore-scripts'],
          {
            cwd: dir,
            timeoutMs: 300_000,
          },
        );
      })((dir) => dockerBuild(excompact, dir, base));
    }
  }
  const images = { base, zookeeper, s3, postgres, excompact };
  await removeStale(Object.values(images));
  return images;
}

/** Removes the test's images of earlier inputs (the cache keeps one version of each image). */
async function removeStale(current: string[]): Promise<void> {
  const { stdout } = await run('docker', [
    'images',
    '--format',
    '{{.Repository}}:{{.Tag}}',
    'excompact-test/*',
  ]);
  const stale = stdout.split('\n').filter((tag) => tag && !current.includes(tag) && !tag.endsWith(':<none>'));
  if (stale.length === 0) return;
  say(`removing images of earlier inputs: ${stale.join(', ')}`);
  await run('docker', ['rmi', ...stale], { allowFailure: true });
}
