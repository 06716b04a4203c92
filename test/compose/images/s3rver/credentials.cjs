// Preloaded before scripts/s3rver.cjs: s3rver accepts only its fixed key pair (S3RVER/S3RVER); the
// compose file gives the S3 server its credentials the way VersityGW takes them (ROOT_ACCESS_KEY,
// ROOT_SECRET_KEY), so the stand-in accepts those too and the excompact services keep theirs.
'use strict';
const { DUMMY_ACCOUNT } = require('s3rver/lib/models/account');

const { ROOT_ACCESS_KEY: key, ROOT_SECRET_KEY: secret } = process.env;
if (key && secret) DUMMY_ACCOUNT.createKeyPair(key, secret);
