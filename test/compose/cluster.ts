/**
 * The compose project under test: the shipped docker-compose.yml with docker-compose.host.yml, run with
 * either compose spelling, and what the scenario asks of its containers.
 */
import { createServer } from 'node:net';
import { join } from 'node:path';
import { RpcClient } from '../../src/rpc/client.js';
import type { Images } from './images.js';
import { ComposeTestError, log, run, say, waitFor, type RunOptions } from './run.js';

export const PROJECT = 'excompact-composetest';
/** The loopback ports docker-compose.host.yml gives its fixed services. */
export const FIXED_PORTS = {
  zookeeper: 31181,
  s3: 31970,
  postgres: 31543,
  manager: 31100,
  'manager-standby': 31101,
};
const POSTGRES_PASSWORD = 'compose-test-postgres-0123456789';
/** The instance secret the test gives the cluster (the compose file's EXC_SECRET). */
const SECRET = 'compose-test-secret-0123456789abcdef';

/** Where the managers keep the metadata: SQLite on their shared volume, or the `postgres` profile's server. */
export type MetadataStore = 'sqlite' | 'postgres';

export interface Container {
  id: string;
  name: string;
  service: string;
  status: string; // running, exited, restarting, …
  health: string | undefined; // healthy, starting, unhealthy; undefined without a health check
  exitCode: number;
  restartCount: number;
}

export class Cluster {
  private readonly env: NodeJS.ProcessEnv;

  constructor(
    private readonly root: string,
    private readonly composeCmd: [string, ...string[]],
    images: Images,
    readonly metadata: MetadataStore,
  ) {
    this.env = {
      ...process.env,
      EXC_IMAGE: images.excompact,
      EXC_ZOOKEEPER_IMAGE: images.zookeeper,
      EXC_S3_IMAGE: images.s3,
      EXC_POSTGRES_IMAGE: images.postgres,
      COMPOSE_PROJECT_NAME: PROJECT,
      EXC_SECRET: SECRET,
      // What the compose file's comment tells an operator to put in .env for the profile.
      COMPOSE_PROFILES: metadata === 'postgres' ? 'postgres' : '',
      EXC_POSTGRES_PASSWORD: POSTGRES_PASSWORD,
      EXC_META:
        metadata === 'postgres'
          ? `postgres://excompact:${POSTGRES_PASSWORD}@127.0.0.1:${FIXED_PORTS.postgres}/excompact`
          : '',
    };
  }

  /** `compose -p … -f docker-compose.yml -f test/compose/docker-compose.host.yml <args>`. */
  compose(args: string[], options: RunOptions = {}) {
    const [command, ...prefix] = this.composeCmd;
    const files = [
      '-f',
      join(this.root, 'docker-compose.yml'),
      '-f',
      join(this.root, 'test/compose/docker-compose.host.yml'),
    ];
    return run(command, [...prefix, '-p', PROJECT, ...files, ...args], {
      env: this.env,
      cwd: this.root,
      timeoutMs: 180_000,
      ...options,
    });
  }

  /** Refuses to start when a port the project needs is taken (a leftover, or another program). */
  async checkPorts(): Promise<void> {
    for (const [service, port] of Object.entries(FIXED_PORTS)) {
      if (service === 'postgres' && this.metadata !== 'postgres') continue;
      const free = await new Promise<boolean>((resolve) => {
        const server = createServer();
        server.once('error', () => resolve(false));
        server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
      });
      if (!free) throw new ComposeTestError('SETUP', `127.0.0.1:${port} (for ${service}) is in use`);
    }
  }

  async containers(service?: string): Promise<Container[]> {
    const filters = ['--filter', `label=com.docker.compose.project=${PROJECT}`];
    if (service) filters.push('--filter', `label=com.docker.compose.service=${service}`);
    const ids = (await run('docker', ['ps', '-a', '-q', ...filters])).stdout.split('\n').filter(Boolean);
    if (ids.length === 0) return [];
    // Only the fields we use: the whole inspection of a dozen containers, every half second, would bury
    // the log.
    const format =
      '{{.Id}} {{.Name}} {{index .Config.Labels "com.docker.compose.service"}} {{.RestartCount}} {{json .State}}';
    const { stdout } = await run('docker', ['inspect', '--format', format, ...ids]);
    return stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const [id = '', name = '', svc = '', restarts] = line.split(' ', 4);
        const state = JSON.parse(line.split(' ').slice(4).join(' ')) as {
          Status: string;
          ExitCode: number;
          Health?: { Status: string };
        };
        return {
          id: id.slice(0, 12),
          name: name.replace(/^\//, ''),
          service: svc,
          status: state.Status,
          health: state.Health?.Status,
          exitCode: state.ExitCode,
          restartCount: Number(restarts),
        };
      });
  }

  async running(service: string): Promise<Container[]> {
    return (await this.containers(service)).filter((c) => c.status === 'running');
  }

  /** A client of a process's HTTP API (on the host network), signing with the cluster's secret. */
  rpc(baseUrl: string): RpcClient {
    return new RpcClient({ baseUrl, secret: SECRET, timeoutMs: 10_000, attempts: 1 });
  }

  /** `docker exec` (with `stdin`, `-i`: the input goes to the command). */
  exec(container: Container, args: string[], options: RunOptions & { stdin?: boolean } = {}) {
    const { stdin, ...rest } = options;
    return run('docker', ['exec', ...(stdin ? ['-i'] : []), container.id, ...args], {
      timeoutMs: 60_000,
      ...rest,
    });
  }

  /** `excompact admin <args> --json` from inside a running tablet server container, parsed. */
  async admin<T>(args: string[]): Promise<T> {
    return JSON.parse(await this.adminText([...args, '--json'])) as T;
  }

  /** `excompact admin <args>` from inside a running tablet server container: its output. */
  async adminText(args: string[]): Promise<string> {
    const [tserver] = await this.running('tserver');
    if (!tserver) throw new ComposeTestError('SCENARIO', 'no tablet server container is running');
    return (await this.exec(tserver, ['excompact', 'admin', ...args])).stdout;
  }

  /** The port a container's process listens on (from its EXC_PORT_FILE). */
  async portOf(container: Container): Promise<number> {
    return Number((await this.exec(container, ['cat', '/tmp/excompact.port'])).stdout.trim());
  }

  /** Waits until every long-running container is running and healthy, and `init` exited 0. */
  async waitHealthy(expected: Record<string, number>, timeoutMs: number): Promise<void> {
    await waitFor('every container healthy', timeoutMs, async () => {
      const all = await this.containers();
      const problems: string[] = [];
      for (const [service, count] of Object.entries(expected)) {
        const mine = all.filter((c) => c.service === service);
        const healthy = mine.filter((c) => c.status === 'running' && c.health === 'healthy');
        if (healthy.length !== count)
          problems.push(
            `${service}: ${healthy.length}/${count} healthy (${mine.map((c) => `${c.status}/${c.health}`).join(', ')})`,
          );
      }
      for (const c of all.filter((c) => c.service === 'init'))
        if (c.status === 'exited' && c.exitCode !== 0)
          throw new ComposeTestError('SCENARIO', `init exited ${c.exitCode}`);
      if (problems.length > 0) throw new Error(problems.join('; '));
      return true;
    });
  }

  async down(): Promise<void> {
    say('compose down -v');
    await this.compose(['down', '-v', '--remove-orphans', '--timeout', '10']);
  }

  /** After `down -v`: no container, volume or network of the project is left. */
  async assertNothingLeft(): Promise<void> {
    const label = ['--filter', `label=com.docker.compose.project=${PROJECT}`];
    const left = [
      ...(await run('docker', ['ps', '-a', '-q', ...label])).stdout.split('\n'),
      ...(await run('docker', ['volume', 'ls', '-q', ...label])).stdout.split('\n'),
      ...(await run('docker', ['network', 'ls', '-q', ...label])).stdout.split('\n'),
    ].filter(Boolean);
    if (left.length > 0) throw new ComposeTestError('SCENARIO', `down -v left ${left.join(', ')}`);
  }

  /** The last lines of every service's log, into the test log (for a failure). */
  async dumpLogs(): Promise<void> {
    const { stdout } = await this.compose(['logs', '--no-color', '--timestamps', '--tail', '3000'], {
      allowFailure: true,
    });
    log(`--- compose logs ---\n${stdout}`);
    const state = await this.containers();
    log(
      state
        .map((c) => `${c.name} ${c.status} health=${c.health} exit=${c.exitCode} restarts=${c.restartCount}`)
        .join('\n'),
    );
  }
}
