// MyST plugin of the DFL book: resolve the portable link forms the chapters use.
//
// The chapters are written so that JupyterLab, Colab (one notebook opened alone)
// and nbconvert, which know only CommonMark and MathJax, render them as well as
// the MyST site does (book/README.md, "Citations, links and equations").
// `python tools/book.py links` stores them in forms that resolve in a notebook on
// its own; this plugin turns them back into what the site resolves itself:
//
// 1. A citation is a link to the chapter's own reference list, whose text is what
//    Jupyter shows: `[(Shi et al., 2023)](#ref-shi2023dfedsam)` (parenthetical, the
//    text is in parentheses) or `[Shi et al. (2023)](#ref-shi2023dfedsam)`
//    (narrative); several works link to the first and list every key in the
//    title: `[(…)](#ref-acar2021feddyn "cite:acar2021feddyn,dai2022dispfl")`. The
//    short form authors may write, `[(?)](cite:k1,k2)`, is accepted too. Each
//    becomes a MyST citation group, so the site renders it from
//    book/references.bib and lists it in the page's references; an unknown key
//    fails the strict build.
// 2. The generated reference list (the last markdown cell, tagged `references`
//    and `remove-cell`) is removed from the page: the site shows its own.
// 3. Another chapter is linked by its page on the book's site,
//    `[text](<Book>/distributed#sec-x)` (`[project.urls] Book` of pyproject.toml;
//    the page of `NN_some_name.ipynb` is `<Book>/some-name`, mystmd's slug, and the
//    first chapter's is `<Book>/`). The link becomes a link to the notebook,
//    `03_distributed.ipynb#sec-x`, which MyST resolves as a cross-reference. A
//    link to a page or a notebook that is not in the book fails the build.
// 4. The Colab badge's image (colab.research.google.com) is served from the
//    book's own copy, _static/colab-badge.svg, so the site builds offline.
//
// Anchors (`<span id="eq-x"></span>`) and links to them need nothing: MyST
// makes the span a target and the link a cross-reference.

import fs from 'node:fs';
import path from 'node:path';

const toText = (node) => (node.value || '') + (node.children || []).map(toText).join('');
const CHAPTER = /^[\w.-]+\.(ipynb|md)(#[\w-]+)?$/;
const BADGE_IMAGE = 'https://colab.research.google.com/assets/colab-badge.svg';
const LOCAL_BADGE = '_static/colab-badge.svg';
const REFERENCES_TAG = 'references';

// mystmd's page slug of a file name (myst-cli createSlug); tools/book.py page_slug is the same rule.
function pageSlug(stem) {
  let name = stem;
  if (!/^([12][0-9]{3}|[0-9]{5})/.test(name)) name = name.replace(/^[0-9_.-]+/, '') || name;
  let slug = ('\u00b6' + name.replace(/&/g, '\u00b6and\u00b6')).toLowerCase().split('')
    .map((c) => (/^[a-z0-9-]$/.test(c) ? c : '\u00b6')).join('')
    .replace(/\u00b6+/g, '\u00b6').slice(1).replace(/\u00b6/g, '-').replace(/-+/g, '-');
  if (slug.startsWith('-')) slug = slug.slice(1);
  if (slug.endsWith('-')) slug = slug.slice(0, -1);
  return slug.slice(0, 50);
}

// [project.urls] Book of the pyproject.toml at or above `dir`.
function bookUrl(dir) {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const file = path.join(d, 'pyproject.toml');
    if (fs.existsSync(file)) {
      const urls = fs.readFileSync(file, 'utf8').split(/^\[/m).find((s) => s.startsWith('project.urls]')) || '';
      const book = urls.match(/^\s*Book\s*=\s*"([^"]+)"/m);
      return book ? book[1].replace(/\/+$/, '') : null;
    }
    if (path.dirname(d) === d) return null;
  }
}

// {page slug: notebook} of the chapters in `dir` (book/NN_name.ipynb, sorted; the first is the index).
function chapterPages(dir) {
  const notebooks = fs.readdirSync(dir).filter((f) => /^[0-9][0-9][^/]*_[^/]*\.ipynb$/.test(f)).sort();
  return Object.fromEntries(notebooks.map((nb, i) => [i === 0 ? '' : pageSlug(nb.replace(/\.ipynb$/, '')), nb]));
}

function fatal(vfile, text, node) {
  const message = vfile.message(text, node && node.position);
  message.fatal = true;
}

function citeGroup(link, keys) {
  const kind = /^\(.*\)$/s.test(toText(link).trim()) ? 'parenthetical' : 'narrative';
  delete link.url;
  delete link.urlSource;
  delete link.title;
  link.type = 'citeGroup';
  link.kind = kind;
  link.children = keys.map((key) => ({ type: 'cite', kind, label: key, identifier: key }));
}

const portableForms = {
  name: 'portable-forms',
  stage: 'document',
  plugin: (_, utils) => (tree, vfile) => {
    const dir = path.dirname(path.resolve(vfile.path || '.'));
    // 2. the generated reference list
    const isReferences = (node) => node.type === 'block' && node.data && Array.isArray(node.data.tags)
      && node.data.tags.includes(REFERENCES_TAG);
    const prune = (node) => {
      if (!node.children) return;
      node.children = node.children.filter((child) => !isReferences(child));
      node.children.forEach(prune);
    };
    prune(tree);
    let book;
    let pages;
    utils.selectAll('link', tree).forEach((link) => {
      const url = link.url || '';
      // 1. citations
      if (url.startsWith('cite:')) {
        citeGroup(link, url.slice('cite:'.length).split(',').map((key) => key.trim()).filter(Boolean));
        return;
      }
      if (url.startsWith('#ref-')) {
        const listed = (link.title || '').startsWith('cite:') ? link.title.slice('cite:'.length) : url.slice('#ref-'.length);
        citeGroup(link, listed.split(',').map((key) => key.trim()).filter(Boolean));
        return;
      }
      // 3. chapter links
      if (/^https?:\/\//.test(url)) {
        if (book === undefined) {
          book = bookUrl(dir);
          if (!book) fatal(vfile, 'No [project.urls] Book in a pyproject.toml above the book: chapter links cannot be resolved');
        }
        if (!book || !(url === book || url.startsWith(`${book}/`) || url.startsWith(`${book}#`))) return;
        pages = pages || chapterPages(dir);
        const [page, anchor] = url.slice(book.length).replace(/^\//, '').split('#');
        const notebook = pages[page.replace(/\/+$/, '')];
        if (!notebook) {
          fatal(vfile, `Link to a page that is not in the book: ${url}`, link);
          return;
        }
        link.url = anchor ? `${notebook}#${anchor}` : notebook;
        link.urlSource = link.url;
      }
      if (CHAPTER.test(link.url || '')) link.data = { ...(link.data || {}), bookChapterLink: url };
    });
    // 4. the Colab badge's image
    utils.selectAll('image', tree).forEach((image) => {
      if (image.url === BADGE_IMAGE || image.urlSource === BADGE_IMAGE) {
        image.url = LOCAL_BADGE;
        image.urlSource = LOCAL_BADGE;
      }
    });
  },
};

const chapterLinksResolve = {
  name: 'chapter-links-resolve',
  stage: 'project',
  plugin: (_, utils) => (tree, vfile) => {
    utils.selectAll('link', tree).forEach((link) => {
      if (link.data && link.data.bookChapterLink && !link.internal) {
        fatal(vfile, `Link to a notebook that is not a page of the book: ${link.data.bookChapterLink}`, link);
      }
    });
  },
};

export default { name: 'DFL book portable links', transforms: [portableForms, chapterLinksResolve] };
