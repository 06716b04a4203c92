/**
 * One typed configuration for every process.
 *
 * Sources, later ones winning: built-in defaults, a JSON file (`EXC_CONFIG` or `--config`), environment
 * variables, then command-line overrides. Everything is validated once at start-up; a bad value stops the
 * process with a message naming the setting and where it came from. The table below is also the
 * configuration reference (`excompact config --docs` prints it).
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ExcError } from './errors.js';

const bool = z.union([
  z.boolean(),
  z.enum(['true', 'false', '1', '0', 'yes', 'no']).transform((v) => v === 'true' || v === '1' || v === 'yes'),
]);
const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);
const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

interface Setting<S extends z.ZodType, D extends z.input<S> | undefined = z.input<S> | undefined> {
  env: string;
  schema: S;
  default: D;
  doc: string;
  /** A credential: a rejected value is never echoed in the error (it goes to logs and terminals). */
  secret: boolean;
}
function setting<S extends z.ZodType, const D extends z.input<S> | undefined>(
  env: string,
  schema: S,
  defaultValue: D,
  doc: string,
  { secret = false }: { secret?: boolean } = {},
): Setting<S, D> {
  return { env, schema, default: defaultValue, doc, secret };
}

/** Every setting: its environment variable, validation, default and meaning. */
export const SETTINGS = {
  zk: setting(
    'EXC_ZK',
    z.string().regex(/^[\w.-]+(:\d+)?(,[\w.-]+(:\d+)?)*(\/[\w/.-]*)?$/, 'expected host:port[,host:port...]'),
    '127.0.0.1:2181',
    'ZooKeeper connect string.',
  ),
  zkRoot: setting(
    'EXC_ZK_ROOT',
    z.string().regex(/^(\/[\w.-]+)+$/, 'expected an absolute znode path such as /excompact'),
    '/excompact',
    'Root znode of this instance.',
  ),
  zkSessionTimeoutMs: setting(
    'EXC_ZK_SESSION_TIMEOUT_MS',
    int(200, 120_000),
    6_000,
    'Requested ZooKeeper session timeout (the server clamps it to [2, 20] x tickTime). A dead process loses its ephemeral nodes, and so its reservations, after this long.',
  ),
  secret: setting(
    'EXC_SECRET',
    z.string().min(16, 'the instance secret must be at least 16 characters'),
    undefined,
    'Instance secret: authenticates every RPC (HMAC) and derives the ZooKeeper digest ACL. Required (or EXC_SECRET_FILE).',
    { secret: true },
  ),
  secretFile: setting('EXC_SECRET_FILE', z.string().min(1), undefined, 'File holding the instance secret.'),
  logLevel: setting(
    'EXC_LOG_LEVEL',
    z.enum(logLevels),
    'info',
    'Log level: fatal, error, warn, info, debug, trace or silent.',
  ),
  store: setting(
    'EXC_STORE',
    z.string().regex(/^(file:\/\/|s3:\/\/)/, 'expected file:///path or s3://bucket/prefix'),
    'file://./data/store',
    'Object store for tablet files: file:///path (local directory) or s3://bucket/prefix.',
  ),
  s3Endpoint: setting(
    'EXC_S3_ENDPOINT',
    z.url(),
    undefined,
    'S3 endpoint URL (for MinIO and other S3-compatible servers).',
  ),
  s3Region: setting('EXC_S3_REGION', z.string().min(1), 'us-east-1', 'S3 region.'),
  s3AccessKeyId: setting(
    'EXC_S3_ACCESS_KEY_ID',
    z.string().min(1),
    undefined,
    'S3 access key id (default: the AWS credential chain).',
  ),
  s3SecretAccessKey: setting(
    'EXC_S3_SECRET_ACCESS_KEY',
    z.string().min(1),
    undefined,
    'S3 secret access key.',
    { secret: true },
  ),
  s3ForcePathStyle: setting(
    'EXC_S3_FORCE_PATH_STYLE',
    bool,
    false,
    'Use path-style S3 URLs (MinIO, s3rver).',
  ),
  bindHost: setting('EXC_BIND_HOST', z.string().min(1), '127.0.0.1', 'Address the HTTP server listens on.'),
  port: setting('EXC_PORT', int(0, 65535), 0, 'HTTP port (0 picks a free one).'),
  advertiseHost: setting(
    'EXC_ADVERTISE_HOST',
    z.string().min(1),
    undefined,
    'Host name other processes use to reach this one (default: the bind address, or the host name when binding to 0.0.0.0; @ip: the first external IPv4 address).',
  ),
  advertisePort: setting(
    'EXC_ADVERTISE_PORT',
    int(0, 65535),
    0,
    'Port other processes use to reach this one (0: the port it listens on). For a process behind a port mapping or a proxy.',
  ),
  portFile: setting(
    'EXC_PORT_FILE',
    z.string().min(1),
    undefined,
    'File a server process writes the port it listens on to, once it listens; `excompact health` reads it when given no port. For health checks of a process started with port 0 (replicas sharing the host network). One process per file.',
  ),
  dataDir: setting(
    'EXC_DATA_DIR',
    z.string().min(1),
    './data',
    "Directory for the manager's metadata store (SQLite, unless EXC_META names a database).",
  ),
  metaUrl: setting(
    'EXC_META',
    z.string().regex(/^postgres(ql)?:\/\/\S+$/, 'expected postgres://user:password@host:port/database'),
    undefined,
    "The manager's metadata store on PostgreSQL (or CockroachDB, YugabyteDB): postgres://user:password@host:port/database. Every manager of the cluster names the same database; the standby then needs no shared volume. Default: SQLite under EXC_DATA_DIR.",
    // It holds the database's password: never echoed (shown by describeDatabase without it).
    { secret: true },
  ),
  gcGraceMs: setting(
    'EXC_GC_GRACE_MS',
    int(0, 30 * 86_400_000),
    600_000,
    'The garbage collector deletes an unreferenced file only after this long (protects running scans and files being registered). Keep it far above the session timeout.',
  ),
  gcIntervalMs: setting(
    'EXC_GC_INTERVAL_MS',
    int(100, 86_400_000),
    60_000,
    'How often the manager collects garbage.',
  ),
  gcSweepIntervalMs: setting(
    'EXC_GC_SWEEP_INTERVAL_MS',
    int(0, 30 * 86_400_000),
    900_000,
    'How often the garbage collector also lists the object store for leftovers of crashes (files written but never registered). A listing reads every object name, so it runs far less often than collection; files replaced by compactions need no listing. 0: every cycle.',
  ),
  outcomeRetentionMs: setting(
    'EXC_OUTCOME_RETENTION_MS',
    int(0, 365 * 86_400_000),
    7 * 86_400_000,
    'How long the manager keeps the record of how each compaction ended (admin compactions history).',
  ),
  outcomeMaxRows: setting(
    'EXC_OUTCOME_MAX_ROWS',
    int(1_000, 10_000_000),
    200_000,
    'At most this many compaction outcomes are kept (the oldest go first; checked at each sweep of the garbage collector, EXC_GC_SWEEP_INTERVAL_MS); their counts are kept for ever.',
  ),
  metricsCacheMs: setting(
    'EXC_METRICS_CACHE_MS',
    int(0, 600_000),
    5_000,
    'The active manager computes its queue metrics (excompact_queue_jobs, excompact_queue_bytes, excompact_queue_oldest_seconds: a read of every tablet and queue entry) at most this often; scrapes in between, or at the same time, get the same figures. 0: at every scrape.',
  ),
  compactorLinkGraceMs: setting(
    'EXC_COMPACTOR_LINK_GRACE_MS',
    int(0, 60_000),
    200,
    "A tablet server fences a compactor (deletes its node, so its reservations are cancelled) when the compactor's link closes while it holds reservations and it does not link again within this long: a crashed compactor's work is back in a fraction of a second. It also asks, every 500 ms, the status address of a compactor that holds reservations on it without a link (its tablet came from a host that died), and fences it when nothing listens there. 0: neither; wait for its session to expire.",
  ),
  queueGoneExitCode: setting(
    'EXC_QUEUE_GONE_EXIT_CODE',
    int(0, 255),
    undefined,
    "Exit code of a compactor whose queue is deleted, or does not exist when it starts (default: 4 when deleted, 1 when missing at start). 0 under a restart policy that restarts only failures (docker compose's on-failure): the pool stops instead of restarting forever.",
  ),
  compactorBackoffMs: setting(
    'EXC_COMPACTOR_BACKOFF_MS',
    int(0, 600_000),
    1_000,
    'A compactor whose job failed waits this long before it takes another, twice as long after each next failure in a row (up to EXC_COMPACTOR_BACKOFF_MAX_MS), so that a sick compactor does not use up the attempts of healthy jobs. A commit ends the streak.',
  ),
  compactorBackoffMaxMs: setting(
    'EXC_COMPACTOR_BACKOFF_MAX_MS',
    int(0, 3_600_000),
    60_000,
    'The longest a compactor waits after failed jobs (see EXC_COMPACTOR_BACKOFF_MS).',
  ),
  compactorSickAfter: setting(
    'EXC_COMPACTOR_SICK_AFTER',
    int(1, 10_000),
    3,
    'After this many failed jobs in a row a compactor reports itself unhealthy: /healthz answers 503 and excompact_compactor_healthy is 0.',
  ),
  compactorExitAfter: setting(
    'EXC_COMPACTOR_EXIT_AFTER',
    int(0, 10_000),
    10,
    'After this many failed jobs in a row a compactor exits with code 5, for its orchestrator to replace it. 0: never.',
  ),
  balanceMoves: setting(
    'EXC_BALANCE_MOVES',
    int(0, 1_000),
    8,
    "The manager spreads each table's tablets over the tablet servers within one of each other, moving at most this many at once (a move cancels nothing: the new host loads the tablet with its reservations). 0: no balancing (tablets are still placed where they have no host).",
  ),
  mergeWaitMs: setting(
    'EXC_MERGE_WAIT_MS',
    int(0, 600_000),
    30_000,
    'A tablet merge lets the compactions running on its tablets finish for up to this long (no new one starts on them meanwhile), then cancels those left; the merge waits no longer than this plus the time to gather its tablets on one server.',
  ),
  tserverHandoverMs: setting(
    'EXC_TSERVER_HANDOVER_MS',
    int(0, 600_000),
    15_000,
    'A tablet server stopped with SIGTERM first asks the manager to move its tablets to the other tablet servers, and waits up to this long for them to go (compactions running on them go on there); 0: it just stops, and the manager reassigns its tablets once its session is gone.',
  ),
  stallTimeoutMs: setting(
    'EXC_STALL_TIMEOUT_MS',
    int(0, 86_400_000),
    300_000,
    'A tablet server cancels a reservation whose compactor reported no progress for this long (0: never).',
  ),
  checkpointBytes: setting(
    'EXC_CHECKPOINT_BYTES',
    int(1, 2 ** 40),
    64 * 1024 * 1024,
    'Compactions with at least this much input write their output as checkpointed parts, one about every this many bytes, and tablet servers record a checkpoint at most every this many bytes of output: a compactor that dies loses no more than this (the next one resumes).',
  ),
  checkpointMs: setting(
    'EXC_CHECKPOINT_MS',
    int(100, 86_400_000),
    30_000,
    'A checkpointed compaction also checkpoints after this long, and tablet servers record a checkpoint at least this long after the last one (whichever of bytes or time comes first).',
  ),
  nativeMerge: setting(
    'EXC_NATIVE_MERGE',
    bool,
    true,
    'Compactions without filters merge in native code (native/merge.c) when it is built; false runs the JavaScript merge, which writes the same files, more slowly.',
  ),
  rpcTimeoutMs: setting('EXC_RPC_TIMEOUT_MS', int(10, 600_000), 10_000, 'Timeout of one outgoing RPC.'),
  managerFailoverMs: setting(
    'EXC_MANAGER_FAILOVER_MS',
    int(0, 3_600_000),
    30_000,
    'How long a client of the manager (CLI, tablet server, compactor) keeps retrying a call through a manager failover before giving up (the CLI then exits 2). Keep it well above the session timeout.',
  ),
  rpcMaxBodyBytes: setting(
    'EXC_RPC_MAX_BODY_BYTES',
    int(1024, 1 << 30),
    16 << 20,
    'Largest accepted RPC body; larger ones get 413.',
  ),
  rpcMaxSkewMs: setting(
    'EXC_RPC_MAX_SKEW_MS',
    int(1_000, 3_600_000),
    60_000,
    'Freshness window of a signed request: older or further in the future gets 401.',
  ),
} as const;

type Settings = typeof SETTINGS;
export type SettingKey = keyof Settings;
type ValueOf<K extends SettingKey> = z.output<Settings[K]['schema']>;
/** The validated configuration: settings with a default always have a value. */
export type Config = {
  [K in SettingKey]: Settings[K]['default'] extends undefined ? ValueOf<K> | undefined : ValueOf<K>;
};

export interface ConfigSources {
  /** Environment (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Path of a JSON config file; default `EXC_CONFIG` from the environment. */
  file?: string;
  /** Command-line overrides; `undefined` values are ignored. */
  overrides?: Partial<Record<SettingKey, unknown>>;
}

/** Loads and validates the configuration. Throws CONFIG_INVALID naming every bad setting. */
export function loadConfig(sources: ConfigSources = {}): Config {
  const env = sources.env ?? process.env;
  const filePath = sources.file ?? env.EXC_CONFIG;
  const fromFile = filePath ? readConfigFile(filePath) : {};
  const problems: string[] = [];
  const out: Record<string, unknown> = {};

  for (const [key, s] of Object.entries(SETTINGS) as [SettingKey, Setting<z.ZodType>][]) {
    let raw: unknown = s.default;
    let source = 'default';
    if (Object.hasOwn(fromFile, key) && fromFile[key] !== undefined)
      [raw, source] = [fromFile[key], `${key} in ${filePath}`];
    if (env[s.env] !== undefined && env[s.env] !== '') [raw, source] = [env[s.env], s.env];
    const override = sources.overrides?.[key];
    if (override !== undefined) [raw, source] = [override, `--${kebab(key)}`];
    if (raw === undefined) {
      out[key] = undefined;
      continue;
    }
    const parsed = s.schema.safeParse(raw);
    if (parsed.success) out[key] = parsed.data;
    else {
      const shown = s.secret ? '<redacted>' : JSON.stringify(raw);
      problems.push(`${source}=${shown}: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
    }
  }
  for (const key of Object.keys(fromFile)) {
    if (!Object.hasOwn(SETTINGS, key)) problems.push(`${key} in ${filePath}: unknown setting`);
  }
  if (problems.length > 0) {
    throw new ExcError('CONFIG_INVALID', `invalid configuration: ${problems.join(', ')}`, {
      details: { problems },
    });
  }
  return out as Config;
}

/** The instance secret, from EXC_SECRET or EXC_SECRET_FILE. Throws CONFIG_INVALID when neither is set. */
/** A database URL as it may be shown or logged: without its user and password. */
export function describeDatabase(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '<unparsable database URL>';
  }
}

export function requireSecret(config: Config): string {
  if (config.secret) return config.secret;
  if (config.secretFile) {
    let text: string;
    try {
      text = readFileSync(config.secretFile, 'utf8').trim();
    } catch (err) {
      throw new ExcError(
        'CONFIG_INVALID',
        `cannot read EXC_SECRET_FILE ${config.secretFile}: ${(err as Error).message}`,
      );
    }
    const parsed = SETTINGS.secret.schema.safeParse(text);
    if (!parsed.success)
      throw new ExcError(
        'CONFIG_INVALID',
        `EXC_SECRET_FILE ${config.secretFile}: ${parsed.error.issues[0]?.message}`,
      );
    return parsed.data;
  }
  throw new ExcError('CONFIG_INVALID', 'no instance secret: set EXC_SECRET or EXC_SECRET_FILE');
}

function readConfigFile(path: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ExcError('CONFIG_INVALID', `cannot read config file ${path}: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ExcError('CONFIG_INVALID', `config file ${path} must hold a JSON object`);
  }
  return value as Record<string, unknown>;
}

function kebab(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** The configuration reference as a Markdown table. */
export function configReference(): string {
  const rows = (Object.entries(SETTINGS) as [SettingKey, Setting<z.ZodType>][]).map(
    ([key, s]) =>
      `| \`${s.env}\` | \`${key}\` | ${s.default === undefined ? '—' : `\`${typeof s.default === 'string' ? s.default : JSON.stringify(s.default)}\``} | ${s.doc} |`,
  );
  return ['| environment | file key | default | meaning |', '| --- | --- | --- | --- |', ...rows].join('\n');
}
