/**
 * The operator's files: docker-compose.yml and the Dockerfile. No Docker engine runs here, so this checks
 * what can be checked without one: the YAML is valid, every excompact command in it is a command the CLI
 * accepts, every setting is one the config knows, ports and health checks agree, every long-running
 * service has a health check, and the compactor pools work for queues that `init` creates.
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
  build?: string;
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  healthcheck?: { test: string[] };
  restart?: string;
  profiles?: string[];
  depends_on?: Record<string, { condition: string }>;
}

const compose = parse(readFileSync(root('docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
};
const services = compose.services;
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

const ours = Object.entries(services).filter(([, s]) => s.image?.startsWith('excompact'));

describe('docker compose', () => {
  it('has the services operators expect, built from this repository', () => {
    expect(Object.keys(services)).toEqual(
      expect.arrayContaining([
        'zookeeper',
        'minio',
        'manager',
        'tserver',
        'init',
        'compactor-small',
        'compactor-large',
      ]),
    );
    expect(services.zookeeper!.image).toMatch(/^zookeeper:/);
    expect(services.minio!.image).toMatch(/^minio\/minio/);
    for (const [, s] of ours) expect(s.build).toBe('.');
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
      expect(s.environment?.EXC_S3_ENDPOINT).toBe('http://minio:9000');
    }
    expect(services.minio!.environment?.MINIO_ROOT_USER).toBe(
      services.manager!.environment?.EXC_S3_ACCESS_KEY_ID,
    );
    expect(services.minio!.environment?.MINIO_ROOT_PASSWORD).toBe(
      services.manager!.environment?.EXC_S3_SECRET_ACCESS_KEY,
    );
  });

  it('every long-running service has a health check, on the port it listens on', () => {
    for (const [name, s] of Object.entries(services)) {
      if (s.restart === 'no' || s.profiles?.includes('tools')) continue;
      expect(s.healthcheck, name).toBeDefined();
      if (!s.image?.startsWith('excompact')) continue;
      const port = s.command![s.command!.indexOf('--port') + 1];
      expect(s.healthcheck!.test).toEqual(['CMD', 'excompact', 'health', '--port', port]);
      checkCommand(s.healthcheck!.test.slice(2));
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
    }
  });

  it('the Dockerfile builds the CLI and installs both commands', () => {
    const dockerfile = readFileSync(root('Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/^FROM node:20/m);
    expect(dockerfile).toMatch(/tsc -p tsconfig\.build\.json/);
    for (const bin of ['bin/excompact.js', 'bin/compactor.js']) {
      expect(dockerfile).toContain(`/app/${bin}`);
      expect(existsSync(root(bin))).toBe(true);
    }
    expect(dockerfile).toMatch(/ENTRYPOINT \["excompact"\]/);
  });
});
