export * from './processes.js';
export * from './proxy.js';
export * from './s3.js';
export * from './sessions.js';
export * from './tmp.js';
export * from './zookeeper.js';
export * from './cluster.js';
export * from './compactor-client.js';
