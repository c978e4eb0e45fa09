// MyST plugin of the DFL book: resolve the portable link forms the chapters use.
//
// The chapters are written so that JupyterLab, Colab and nbconvert, which know
// only CommonMark and MathJax, render them as well as the MyST site does
// (book/README.md, "Citations, links and equations"). Two of those forms need
// help from the site build:
//
// 1. A citation is a link with the `cite:` scheme, whose text is what Jupyter
//    shows: `[(Shi et al., 2023)](cite:shi2023dfedsam)` (parenthetical, the text
//    is in parentheses) or `[Shi et al. (2023)](cite:shi2023dfedsam)` (narrative);
//    several keys are separated by commas. It becomes a MyST citation group, so
//    the site renders it from book/references.bib and lists it in the page's
//    references; an unknown key fails the strict build.
// 2. A chapter is linked by its notebook, `[text](03_decentralized_fedavg.ipynb)`,
//    which Jupyter and Colab open. MyST resolves such links to the page; a link
//    to a notebook that is not in the book would silently stay a broken file
//    link, so it is reported as an error here.
//
// Anchors (`<span id="eq-x"></span>`) and links to them need nothing: MyST
// makes the span a target and the link a cross-reference.

const toText = (node) => (node.value || '') + (node.children || []).map(toText).join('');
const CHAPTER = /^[\w.-]+\.(ipynb|md)(#[\w-]+)?$/;

const citeLinks = {
  name: 'cite-links',
  stage: 'document',
  plugin: (_, utils) => (tree) => {
    utils.selectAll('link', tree).forEach((link) => {
      const url = link.url || '';
      if (CHAPTER.test(url)) link.data = { ...(link.data || {}), bookChapterLink: url };
      if (!url.startsWith('cite:')) return;
      const kind = /^\(.*\)$/s.test(toText(link).trim()) ? 'parenthetical' : 'narrative';
      const keys = url.slice('cite:'.length).split(',').map((key) => key.trim()).filter(Boolean);
      delete link.url;
      delete link.urlSource;
      delete link.title;
      link.type = 'citeGroup';
      link.kind = kind;
      link.children = keys.map((key) => ({ type: 'cite', kind, label: key, identifier: key }));
    });
  },
};

const chapterLinksResolve = {
  name: 'chapter-links-resolve',
  stage: 'project',
  plugin: (_, utils) => (tree, vfile) => {
    utils.selectAll('link', tree).forEach((link) => {
      if (link.data && link.data.bookChapterLink && !link.internal) {
        const message = vfile.message(
          `Link to a notebook that is not a page of the book: ${link.data.bookChapterLink}`, link.position);
        message.fatal = true;
      }
    });
  },
};

export default { name: 'DFL book portable links', transforms: [citeLinks, chapterLinksResolve] };
