export * from './acl.js';
export * from './embedded.js';
export * from './errors.js';
export * from './layout.js';
export * from './protected.js';
export * from './session.js';
