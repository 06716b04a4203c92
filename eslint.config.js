// Lint rules: the recommended type-aware set, plus the rules that catch the
// bugs that matter most in a distributed system written in Node: promises that
// nobody awaits (a lost rejection is a lost failure) and misused async callbacks.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'data/**', 'coverage/**', 'bin/**', 'scripts/**', '**/*.cjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['eslint.config.js'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      // An async function without await is how an interface that returns a promise is met synchronously.
      '@typescript-eslint/require-await': 'off',
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    files: ['eslint.config.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // The monitor page: plain browser modules, served as they are (no build step, so no TypeScript).
    files: ['web/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { globals: globals.browser, parserOptions: { projectService: false, project: null } },
  },
);
