import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { configReference, describeDatabase, loadConfig, requireSecret, SETTINGS } from '../../src/config.js';
import { ExcError } from '../../src/errors.js';
import { tempDir } from '../support/tmp.js';

const dirs: { cleanup: () => void }[] = [];
afterAll(() => {
  for (const d of dirs) d.cleanup();
});

function configFile(content: unknown): string {
  const dir = tempDir('config');
  dirs.push(dir);
  const path = join(dir.path, 'config.json');
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

describe('config', () => {
  it('defaults apply when nothing is set', () => {
    const config = loadConfig({ env: {} });
    expect(config.zk).toBe('127.0.0.1:2181');
    expect(config.zkRoot).toBe('/excompact');
    expect(config.zkSessionTimeoutMs).toBe(6_000);
    expect(config.secret).toBeUndefined();
  });

  it('environment overrides the file, and command-line overrides both', () => {
    const file = configFile({ zk: 'file-host:2181', port: 7000, logLevel: 'debug' });
    const config = loadConfig({
      env: { EXC_CONFIG: file, EXC_ZK: 'env-host:2181' },
      overrides: { port: 7100 },
    });
    expect(config.zk).toBe('env-host:2181');
    expect(config.port).toBe(7100);
    expect(config.logLevel).toBe('debug');
  });

  it('a bad value stops start-up naming the setting and where it came from', () => {
    const err = (() => {
      try {
        loadConfig({ env: { EXC_ZK_SESSION_TIMEOUT_MS: 'soon', EXC_STORE: 'ftp://x' } });
      } catch (e) {
        return e;
      }
    })() as ExcError;
    expect(err).toBeInstanceOf(ExcError);
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.message).toContain('EXC_ZK_SESSION_TIMEOUT_MS="soon"');
    expect(err.message).toContain('EXC_STORE="ftp://x"');
  });

  it('a rejected credential is not echoed in the error', () => {
    const message = (env: NodeJS.ProcessEnv): string => {
      try {
        loadConfig({ env });
      } catch (e) {
        return (e as ExcError).message;
      }
      throw new Error('expected CONFIG_INVALID');
    };
    const short = message({ EXC_SECRET: 'hunter2-short' });
    expect(short).toContain('EXC_SECRET=<redacted>: the instance secret must be at least 16 characters');
    expect(short).not.toContain('hunter2');
    const file = configFile({ s3SecretAccessKey: 12345678 });
    const key = message({ EXC_CONFIG: file });
    expect(key).toContain('s3SecretAccessKey in');
    expect(key).not.toContain('12345678');
    // A database URL holds its password: a malformed one is named, not shown.
    const db = message({ EXC_META: 'postgres://exc:hunter2-SECRET@db.internal:5432/exc ' });
    expect(db).toContain('EXC_META=<redacted>');
    expect(db).not.toContain('hunter2');
    expect(describeDatabase('postgres://exc:hunter2-SECRET@db.internal:5432/exc')).toBe(
      'postgres://db.internal:5432/exc',
    );
  });

  it('unknown keys and unreadable JSON in the config file are reported', () => {
    expect(() => loadConfig({ env: {}, file: configFile({ zookeeper: 'x' }) })).toThrow(
      /zookeeper in .*unknown setting/,
    );
    expect(() => loadConfig({ env: {}, file: configFile('{not json') })).toThrow(/cannot read config file/);
    expect(() => loadConfig({ env: {}, file: '/nonexistent/config.json' })).toThrow(
      /cannot read config file/,
    );
  });

  it('booleans and numbers from the environment are parsed strictly', () => {
    expect(loadConfig({ env: { EXC_S3_FORCE_PATH_STYLE: 'true' } }).s3ForcePathStyle).toBe(true);
    expect(loadConfig({ env: { EXC_S3_FORCE_PATH_STYLE: '0' } }).s3ForcePathStyle).toBe(false);
    expect(() => loadConfig({ env: { EXC_S3_FORCE_PATH_STYLE: 'maybe' } })).toThrow(
      /EXC_S3_FORCE_PATH_STYLE/,
    );
    expect(() => loadConfig({ env: { EXC_PORT: '70000' } })).toThrow(/EXC_PORT/);
  });

  it('the secret is required, at least 16 characters, from the environment or a file', () => {
    expect(() => requireSecret(loadConfig({ env: {} }))).toThrow(/EXC_SECRET/);
    expect(() => loadConfig({ env: { EXC_SECRET: 'short' } })).toThrow(/at least 16/);
    const file = configFile('a-long-enough-secret-value\n');
    expect(requireSecret(loadConfig({ env: { EXC_SECRET_FILE: file } }))).toBe('a-long-enough-secret-value');
  });

  it('the reference documents every setting', () => {
    const reference = configReference();
    for (const s of Object.values(SETTINGS)) expect(reference).toContain(s.env);
  });
});
