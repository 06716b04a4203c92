/**
 * The operator's files: docker-compose.yml and the Dockerfile, checked without a Docker engine (which
 * `npm run test:compose` runs them on): the YAML is valid, every excompact command in it is a command the
 * CLI accepts, every setting is one the config knows, ports and health checks agree, every long-running
 * service has a health check, the compactor pools work for queues that `init` creates, and the compose
 * test's override and image change only what the README says they change.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { SETTINGS } from '../../src/config.js';
import { buildProgram } from '../../src/cli/program.js';

const root = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url));

interface Service {
  image?: string;
  network_mode?: string;
  build?: string;
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, string | number>;
  ports?: string[];
  healthcheck?: { test?: string[]; disable?: boolean };
  restart?: string;
  profiles?: string[];
  depends_on?: Record<string, { condition: string }>;
}

const load = (path: string) =>
  (parse(readFileSync(root(path), 'utf8'), { merge: true }) as { services: Record<string, Service> })
    .services;
const services = load('docker-compose.yml');
const hostOverride = load('test/compose/docker-compose.host.yml');
const knownEnv = new Set([
  ...Object.values(SETTINGS).map((s) => s.env),
  'EXC_CONFIG',
  'EXC_EXIT_WITH_PARENT',
]);

/** Parses `args` as the CLI would, without running anything; throws on an unknown command or a bad option. */
function checkCommand(args: string[]): void {
  const program = buildProgram();
  const strict = (cmd: Command): void => {
    cmd.exitOverride();
    cmd.configureOutput({ writeErr: () => undefined, writeOut: () => undefined });
    cmd.commands.forEach(strict);
  };
  strict(program);
  let cmd: Command = program;
  // --help is handled by commander itself, before options are parsed.
  let rest = args.filter((a) => a !== '--help');
  for (;;) {
    const { operands, unknown } = cmd.parseOptions(rest);
    const next = operands[0] === undefined ? undefined : cmd.commands.find((c) => c.name() === operands[0]);
    if (!next) {
      if (cmd.commands.length > 0 && operands.length > 0)
        throw new Error(`excompact ${args.join(' ')}: unknown command ${operands[0]}`);
      if (unknown.length > 0) throw new Error(`excompact ${args.join(' ')}: unknown option ${unknown[0]}`);
      const required = cmd.registeredArguments.filter((a) => a.required).length;
      if (operands.length < required)
        throw new Error(`excompact ${args.join(' ')}: missing arguments of ${cmd.name()}`);
      if (cmd.commands.length > 0 && operands.length === 0 && cmd !== program && !args.includes('--help'))
        throw new Error(`excompact ${args.join(' ')}: incomplete command`);
      return;
    }
    cmd = next;
    rest = [...operands.slice(1), ...unknown];
  }
}

/** The excompact invocations of a service: its command, or each `excompact …` of a shell script. */
function invocations(s: Service): string[][] {
  if (s.entrypoint?.[0] === 'sh') {
    return (s.command ?? [])
      .join(' ')
      .split('&&')
      .map((part) => part.trim().split(/\s+/))
      .map((words) => {
        expect(words[0]).toBe('excompact');
        return words.slice(1);
      });
  }
  return s.command ? [s.command] : [];
}

const ours = Object.entries(services).filter(([, s]) => s.build === '.');

describe('docker compose', () => {
  it('has the services operators expect, built from this repository, with images named by variables', () => {
    expect(Object.keys(services)).toEqual(
      expect.arrayContaining([
        'zookeeper',
        's3',
        'manager',
        'manager-standby',
        'tserver',
        'init',
        'compactor-small',
        'compactor-large',
      ]),
    );
    expect(services.zookeeper!.image).toBe('${EXC_ZOOKEEPER_IMAGE:-zookeeper:3.8}');
    // minio/minio is no longer published on Docker Hub: an S3 server users can pull.
    expect(services.s3!.image).toMatch(/^\$\{EXC_S3_IMAGE:-versity\/versitygw:v[\d.]+\}$/);
    for (const [name, s] of ours) expect(s.image, name).toBe('${EXC_IMAGE:-excompact:latest}');
    expect(ours.length).toBeGreaterThanOrEqual(7);
  });

  it('every excompact command in it is one the CLI accepts', () => {
    for (const [name, s] of ours) {
      for (const args of invocations(s)) expect(() => checkCommand(args), name).not.toThrow();
    }
    // The check itself can fail:
    expect(() => checkCommand(['compactor', 'small', '--prot', '9300'])).toThrow(/unknown option/);
    expect(() => checkCommand(['compactr', 'small'])).toThrow();
    expect(() => checkCommand(['admin', 'queue', 'create', 'x', '--bins', 'zero'])).toThrow();
  });

  it('every setting is one the configuration knows', () => {
    for (const [name, s] of ours) {
      for (const key of Object.keys(s.environment ?? {}))
        expect(knownEnv.has(key), `${name}: ${key}`).toBe(true);
      expect(s.environment?.EXC_ZK).toBe('zookeeper:2181');
      expect(s.environment?.EXC_S3_ENDPOINT).toBe('http://s3:7070');
    }
    expect(services.s3!.command).toEqual(expect.arrayContaining(['--port', ':7070']));
    expect(services.s3!.environment?.ROOT_ACCESS_KEY).toBe(
      services.manager!.environment?.EXC_S3_ACCESS_KEY_ID,
    );
    expect(services.s3!.environment?.ROOT_SECRET_KEY).toBe(
      services.manager!.environment?.EXC_S3_SECRET_ACCESS_KEY,
    );
  });

  it('the postgres profile adds a database that EXC_META can name; without it the managers use SQLite', () => {
    const db = services.postgres!;
    expect(db.profiles).toEqual(['postgres']);
    expect(db.image).toMatch(/^\$\{EXC_POSTGRES_IMAGE:-postgres:[\w.-]+\}$/);
    // Nothing else is in the profile, and nothing depends on the database (a manager retries until it
    // answers): without the profile every other service starts as before.
    for (const [name, s] of Object.entries(services)) {
      if (name !== 'postgres') expect(s.profiles ?? [], name).not.toContain('postgres');
      expect(Object.keys(s.depends_on ?? {}), name).not.toContain('postgres');
    }
    for (const name of ['manager', 'manager-standby'])
      expect(services[name]!.environment?.EXC_META, name).toBe('${EXC_META:-}');
    // The .env the file's header suggests names the profile's database with its user and password.
    const header = readFileSync(root('docker-compose.yml'), 'utf8');
    const url = /^#\s+EXC_META=(\S+)$/m.exec(header)?.[1];
    const password = /^#\s+EXC_POSTGRES_PASSWORD=(\S+)$/m.exec(header)?.[1];
    expect(/^#\s+COMPOSE_PROFILES=postgres$/m.test(header)).toBe(true);
    const env = db.environment!;
    expect(env.POSTGRES_PASSWORD).toMatch(/^\$\{EXC_POSTGRES_PASSWORD:-.+\}$/);
    expect(url).toBe(`postgres://${env.POSTGRES_USER}:${password}@postgres:5432/${env.POSTGRES_DB}`);
    expect(() => SETTINGS.metaUrl.schema.parse(url)).not.toThrow();
  });

  it('every long-running service has a health check, on the port it listens on', () => {
    for (const [name, s] of Object.entries(services)) {
      if (s.restart === 'no' || s.profiles?.includes('tools')) continue;
      expect(s.healthcheck?.test, name).toBeDefined();
      if (s.build !== '.') continue;
      // `excompact health` finds the port in EXC_PORT_FILE (set by the image), else EXC_PORT.
      expect(s.healthcheck!.test).toEqual(['CMD', 'excompact', 'health']);
      checkCommand(s.healthcheck!.test!.slice(2));
      const port = String(s.environment?.EXC_PORT);
      expect(port, name).toMatch(/^\d+$/);
      expect(s.command, name).not.toContain('--port');
      for (const published of s.ports ?? []) expect(published.split(':').pop(), name).toBe(port);
    }
  });

  it('compactor pools work for queues that init creates, and start after it', () => {
    const created = invocations(services.init!)
      .filter((a) => a[0] === 'admin' && a[1] === 'queue' && a[2] === 'create')
      .map((a) => a[3]);
    const pools = Object.entries(services).filter(([n]) => n.startsWith('compactor-'));
    expect(pools.length).toBeGreaterThan(0);
    for (const [name, s] of pools) {
      expect(created).toContain(s.command![1]);
      expect(s.depends_on?.init?.condition, name).toBe('service_completed_successfully');
      // A deleted queue stops its pool for good: exit 0 under a policy that restarts only failures.
      expect(s.restart, name).toBe('on-failure');
      expect(String(s.environment?.EXC_QUEUE_GONE_EXIT_CODE), name).toBe('0');
    }
  });

  it('the Dockerfile builds the CLI and installs both commands, on a base image given as an argument', () => {
    const dockerfile = readFileSync(root('Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/^ARG BASE=node:20-bookworm-slim$/m);
    expect(dockerfile).toMatch(/^FROM \$\{BASE\} AS build$/m);
    // npm run build: the compile and the CLI's bundle (scripts/bundle.mjs, copied in for it).
    expect(dockerfile).toMatch(/^RUN npm run build /m);
    expect(dockerfile).toMatch(/^COPY scripts\/bundle\.mjs /m);
    for (const bin of ['bin/excompact.js', 'bin/compactor.js']) {
      expect(dockerfile).toContain(`/app/${bin}`);
      expect(existsSync(root(bin))).toBe(true);
    }
    expect(dockerfile).toMatch(/ENTRYPOINT \["excompact"\]/);
    expect(dockerfile).toMatch(/EXC_PORT_FILE=\/tmp\/excompact\.port/);
  });

  it("the compose test's project image is the Dockerfile's last stage, with the build taken from the host", () => {
    const lastStage = (path: string) => {
      const text = readFileSync(root(path), 'utf8');
      return text
        .slice(text.lastIndexOf('\nFROM '))
        .split('\n')
        .slice(2)
        .map((l) => l.replace('COPY --from=build /app/', 'COPY '))
        .map((l) => l.replace(/^COPY (node_modules|dist) \.\/\1$/, 'COPY $1 ./$1'))
        .join('\n');
    };
    expect(lastStage('test/compose/images/excompact/Dockerfile')).toBe(lastStage('Dockerfile'));
  });

  it("the compose test changes only networking, ports, the S3 server and one pool's read rate", () => {
    expect(Object.keys(hostOverride).sort()).toEqual(Object.keys(services).sort());
    const allowedEnv = new Set([
      'EXC_ZK',
      'EXC_S3_ENDPOINT',
      'EXC_BIND_HOST',
      'EXC_ADVERTISE_HOST',
      'EXC_PORT',
      'ZOO_CFG_EXTRA',
    ]);
    for (const [name, s] of Object.entries(hostOverride)) {
      expect(s.network_mode, name).toBe('host');
      expect(s.image, name).toBeUndefined(); // images are swapped by variables only
      expect(s.ports, name).toBeUndefined();
      for (const key of Object.keys(s.environment ?? {}))
        expect(allowedEnv.has(key), `${name}: ${key}`).toBe(true);
      const changed = Object.keys(s).filter((k) => !['network_mode', 'environment'].includes(k));
      if (name === 's3' || name === 'postgres') expect(changed.sort()).toEqual(['command', 'healthcheck']);
      else if (name === 'compactor-small') {
        expect(changed).toEqual(['command']);
        expect(s.command).toEqual([...services[name]!.command!, '--throughput', '8192']);
      } else expect(changed, name).toEqual([]);
    }
  });
});
