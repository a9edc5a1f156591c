"""The instance browser's page (``report/instances.html``): static HTML, CSS and a small script with no library
and no network access. It reads ``browser/data.js`` (written by :mod:`ctxbench.report.browser`) through a
``<script src>``, so it works opened as a file as well as served over HTTP, and loads a context's
``browser/contexts/<key>.js`` only when that context is opened. Every text from the data is put into the page with
``textContent`` (never parsed as HTML)."""

from __future__ import annotations

import html

CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header.top{position:sticky;top:0;z-index:5;background:#fff;border-bottom:1px solid #ddd;padding:.6em 1.2em}
header.top h1{font-size:1.25em;margin:.1em 0 .4em;display:inline-block}
header.top a.back{margin-right:1em}
#filters{display:flex;flex-wrap:wrap;gap:.4em .9em;align-items:flex-end}
#filters label{display:flex;flex-direction:column;font-size:.78em;color:#555}
#filters select,#filters input{font-size:1.05em;padding:2px 4px;max-width:22em}
#filters input[type=search]{width:18em}
#filters select#f-model{max-width:none}
#filters select#f-question{width:22em}
#count{margin:.5em 0 0;font-size:.9em;color:#333}
main{padding:.6em 1.2em;max-width:1200px}
section.inst{background:#fff;border:1px solid #ddd;border-radius:6px;margin:0 0 1em;padding:.6em .9em}
.meta{font-size:.82em;color:#555;margin-bottom:.3em}
.meta code{color:#222}
.chip{display:inline-block;background:#eef2f7;border-radius:3px;padding:0 .4em;margin:0 .3em .2em 0}
.q{font-size:1.02em;margin:.3em 0}
.label{font-size:.75em;text-transform:uppercase;letter-spacing:.03em;color:#666;margin-right:.4em}
pre{white-space:pre-wrap;word-break:break-word;margin:.2em 0;font-family:ui-monospace,monospace;font-size:.86em}
.gold pre{background:#f3f8f1;padding:.2em .4em;border-radius:3px;max-height:12em;overflow:auto}
article.ans{border-left:4px solid #bbb;padding:.3em .6em;margin:.5em 0;background:#fcfcfc}
article.correct{border-left-color:#2ca02c}article.wrong{border-left-color:#d62728}
article.partial{border-left-color:#ff9f1c}article.unscored{border-left-color:#999}
article.ans>header{font-size:.9em;margin-bottom:.2em}
.mark{font-weight:bold;margin-right:.3em}.correct .mark{color:#2ca02c}.wrong .mark{color:#d62728}
.partial .mark{color:#c77800}.unscored .mark{color:#777}
.score{display:inline-block;border:1px solid #ccc;border-radius:3px;padding:0 .35em;margin-left:.35em;font-size:.85em}
.score.primary{font-weight:bold;border-color:#888}
.tag{display:inline-block;background:#fde8e8;color:#8a1c1c;border-radius:3px;padding:0 .35em;margin-left:.3em;font-size:.8em}
.extracted pre{background:#f7f3e8;padding:.2em .4em;border-radius:3px}
.reply pre{max-height:18em;overflow:auto;background:#f6f6f6;padding:.2em .4em;border-radius:3px}
details.reasoning pre,details.raw pre{max-height:18em;overflow:auto;background:#f2f0f7;padding:.2em .4em}
details summary{cursor:pointer;font-size:.85em;color:#444}
.status{color:#8a1c1c;font-size:.85em}
.finish{font-size:.85em;color:#555}table.credit{border-collapse:collapse;font-size:.85em}
table.credit td,table.credit th{border:1px solid #ddd;padding:.1em .4em;text-align:left;vertical-align:top}
.messages pre{background:#f3f6fa;padding:.2em .4em;border-radius:3px;white-space:pre-wrap}.ctxmark{color:#777}
details.context .ctx{max-height:30em;overflow:auto;background:#fff;border:1px solid #eee;padding:.3em .5em}
mark.evidence{background:#ffe066;outline:1px solid #e0b400}
.ctxbar{font-size:.85em;margin:.3em 0}
#more{margin:0 1.2em 2em;font-size:1em}
.empty{color:#666;font-style:italic}
.unasked{font-size:.88em;color:#444;margin:.3em 0 0}
"""

JS = r"""
(function () {
  var D = window.CTXBENCH_BROWSER;
  var PAGE = 100;               // instance cards rendered at once (every card of a build of up to 100 instances)
  var shown = PAGE;
  var el = function (tag, cls, text) {
    var e = document.createElement(tag); if (cls) e.className = cls;
    if (text != null) e.textContent = String(text); return e;
  };
  var fmtInt = function (n) { return n == null ? '–' : Number(n).toLocaleString('en-US'); };
  var FIXED = ['q', 'model', 'mode', 'length', 'matcher', 'score', 'sort'];
  var controls = {}, hidden = {};

  function option(sel, value, label) {
    var o = el('option', null, label == null ? value : label); o.value = value; sel.appendChild(o);
  }
  function addSelect(key, label, values, labels) {
    var lab = el('label', null, label), sel = el('select');
    sel.id = 'f-' + key; sel.name = key; option(sel, '', 'all');
    values.forEach(function (v, k) { option(sel, String(v), labels ? labels[k] : String(v)); });
    lab.appendChild(sel); document.getElementById('filters').appendChild(lab);
    sel.addEventListener('change', update); controls[key] = sel;
  }
  function build() {
    var f = document.getElementById('filters');
    var lab = el('label', null, 'search question / id'), q = el('input');
    q.type = 'search'; q.id = 'f-q'; q.placeholder = 'words of the question';
    q.addEventListener('input', update); lab.appendChild(q); f.appendChild(lab); controls.q = q;
    if (D.questions.length) addSelect('question', 'question', D.questions);
    addSelect('model', 'model', D.models);
    if (D.modes.length > 1) addSelect('mode', 'mode', D.modes);
    addSelect('length', 'context length (tokens)', D.lengths, D.lengths.map(fmtInt));
    D.facets.forEach(function (fc) {
      if (fc.values.length > 1) addSelect(fc.key, fc.label, fc.values);
      else hidden[fc.key] = {value: ''};   // one value: no filter shown, but a link may name it
    });
    addSelect('matcher', 'matcher', D.matchers, null);
    controls.matcher.options[0].textContent = 'primary';
    if (D.answered != null && D.answered < D.instances.length)
      addSelect('asked', 'asked', ['answered', 'unasked'], ['answered', 'not asked']);
    addSelect('score', 'score', ['scored', 'correct', 'partial', 'wrong', 'unscored'],
              ['scored', 'correct (1)', 'partial', 'wrong (0)', 'not scored']);
    controls.score.options[0].textContent = 'any';
    var sorts = [['', 'build order'], ['score', 'score: worst first'], ['-score', 'score: best first'],
                 ['length', 'context length ↑'], ['-length', 'context length ↓'], ['id', 'instance id']];
    D.facets.forEach(function (fc) { if (fc.values.length > 1) sorts.push([fc.key, fc.label]); });
    var lab2 = el('label', null, 'sort'), s = el('select'); s.id = 'f-sort';
    sorts.forEach(function (x) { option(s, x[0], x[1]); });
    s.addEventListener('change', update); lab2.appendChild(s); f.appendChild(lab2); controls.sort = s;
    var reset = el('button', null, 'clear filters'); reset.type = 'button';
    reset.addEventListener('click', function () {
      Object.keys(controls).forEach(function (k) { controls[k].value = ''; });
      Object.keys(hidden).forEach(function (k) { hidden[k].value = ''; }); update();
    });
    f.appendChild(reset);
  }
  function readHash() {
    var h = window.location.hash.replace(/^#/, '') || window.location.search.replace(/^\?/, '');
    var p = {};
    h.split('&').forEach(function (kv) {
      if (!kv) return; var i = kv.indexOf('=');
      var k = decodeURIComponent(i < 0 ? kv : kv.slice(0, i)), v = i < 0 ? '' : decodeURIComponent(kv.slice(i + 1));
      p[k] = v;
    });
    Object.keys(hidden).forEach(function (k) { hidden[k].value = p[k] == null ? '' : p[k]; });
    Object.keys(controls).forEach(function (k) {
      var c = controls[k], v = p[k] == null ? '' : p[k];
      if (c.tagName === 'SELECT' && v && !Array.prototype.some.call(c.options, function (o) { return o.value === v; }))
        option(c, v, v + ' (no instance)');
      c.value = v;
    });
  }
  function state() {
    var s = {};
    Object.keys(controls).forEach(function (k) { if (controls[k].value) s[k] = controls[k].value; });
    Object.keys(hidden).forEach(function (k) { if (hidden[k].value) s[k] = hidden[k].value; });
    return s;
  }
  function writeHash(s) {
    var h = Object.keys(s).map(function (k) { return encodeURIComponent(k) + '=' + encodeURIComponent(s[k]); }).join('&');
    if (('#' + h) !== window.location.hash && !(h === '' && window.location.hash === ''))
      history.replaceState(null, '', h ? '#' + h : window.location.pathname + window.location.search);
  }
  function matcherOf(inst, s) { return s.matcher || inst.primary; }
  function verdict(a, m) {
    var v = a.scores[m];
    if (v == null) return 'unscored';
    return v >= 1 ? 'correct' : (v <= 0 ? 'wrong' : 'partial');
  }
  function instanceMatches(inst, s) {
    if (s.length && String(inst.length) !== s.length) return false;
    if (s.question && inst.question !== s.question) return false;
    for (var k = 0; k < D.facets.length; k++) {
      var fc = D.facets[k], want = s[fc.key]; if (!want) continue;
      var v = inst.facets[fc.key];
      if (fc.multi ? !(v || []).some(function (x) { return String(x) === want; }) : String(v) !== want) return false;
    }
    if (s.q) {
      var hay = (inst.question + ' ' + inst.id + ' ' + (inst.question_id || '')).toLowerCase();
      var words = s.q.toLowerCase().split(/\s+/).filter(Boolean);
      if (!words.every(function (w) { return hay.indexOf(w) >= 0; })) return false;
    }
    return true;
  }
  function answerMatches(a, inst, s) {
    if (s.model && a.model !== s.model) return false;
    if (s.mode && a.mode !== s.mode) return false;
    if (s.score) {
      var v = verdict(a, matcherOf(inst, s));
      if (s.score === 'scored' ? v === 'unscored' : v !== s.score) return false;
    }
    return true;
  }
  var byInstance = D.instances.map(function () { return []; });
  D.answers.forEach(function (a) { byInstance[a.i].push(a); });

  function renderAnswer(a, inst, s) {
    var m = matcherOf(inst, s), v = verdict(a, m);
    var art = el('article', 'ans ' + v);
    art.dataset.model = a.model; art.dataset.verdict = v; art.dataset.instance = inst.id;
    var h = el('header');
    h.appendChild(el('span', 'mark', {correct: '✓', wrong: '✗', partial: '◐', unscored: '–'}[v]));
    h.appendChild(el('b', 'model', a.model));
    h.appendChild(document.createTextNode(' · ' + a.mode + (a.sample ? ' · sample ' + a.sample : '')));
    Object.keys(a.scores).forEach(function (k) {
      var sc = el('span', 'score' + (k === m ? ' primary' : ''), k + ' ' + Number(a.scores[k]).toFixed(2));
      sc.title = k === m ? 'the matcher this view classifies by' : ''; h.appendChild(sc);
    });
    var tags = {};
    Object.keys(a.tags).forEach(function (k) { (a.tags[k] || []).forEach(function (t) { tags[t] = 1; }); });
    Object.keys(tags).forEach(function (t) { h.appendChild(el('span', 'tag', t)); });
    art.appendChild(h);
    if (a.cut_off) art.appendChild(el('div', 'status', a.scores[m] != null ?
      '0, cut off: the output budget ended this reply before its answer; every matcher scores it 0 and the mean ' +
      'counts it (raise --max-tokens and rerun to ask again)' :
      'cut off, not scored yet: the output budget ended this reply before its answer (ctxbench score scores it 0)'));
    else if (a.status !== 'ok') art.appendChild(el('div', 'status', 'status ' + a.status + (a.error ? ': ' + a.error : '')));
    var fin = 'finish reason: ' + (a.finish_reason == null ? 'not stored' : a.finish_reason);
    fin += a.cut_off ? ' · the output limit ended the reply' : (a.finish_reason == null ? '' : ' · the model ended the reply');
    art.appendChild(el('div', 'finish' + (a.cut_off ? ' status' : ''), fin));
    var ex = a.extracted[m] != null ? a.extracted[m] : a.extracted[Object.keys(a.extracted)[0]];
    if (ex != null) {
      var d = el('div', 'extracted'); d.appendChild(el('span', 'label', 'extracted answer (scored)'));
      d.appendChild(el('pre', null, ex === '' ? '(no answer)' : ex)); art.appendChild(d);
    }
    var dt = a.details && (a.details[m] || a.details[Object.keys(a.details)[0]]);
    if (dt && dt.length) {
      var dd = el('details', 'credit'); dd.open = true;
      dd.appendChild(el('summary', null, 'credit per gold row (' + (a.details[m] ? m : Object.keys(a.details)[0]) + ')'));
      var tb = el('table', 'credit');
      var hr = el('tr'); ['gold row', 'credit', 'reply text that earned it'].forEach(function (c) { hr.appendChild(el('th', null, c)); });
      tb.appendChild(hr);
      dt.forEach(function (row) {
        var tr = el('tr');
        tr.appendChild(el('td', null, Array.isArray(row.gold) ? row.gold.map(function (g) { return g == null ? 'NULL' : String(g); }).join(' | ') : String(row.gold)));
        tr.appendChild(el('td', null, Number(row.credit).toFixed(2)));
        tr.appendChild(el('td', null, row.text == null ? '–' : String(row.text)));
        tb.appendChild(tr);
      });
      dd.appendChild(tb); art.appendChild(dd);
    }
    var r = el('div', 'reply'); r.appendChild(el('span', 'label', 'reply'));
    r.appendChild(el('pre', null, a.reply == null ? '(none)' : (a.visible === '' && a.reply ? '(only reasoning)' : a.visible)));
    if (a.full) {  // a long answer: its first characters are here, the whole texts load on demand
      var all = el('button', 'showall', 'show all (' + fmtInt(Math.max(a.full.chars.reply || 0, a.full.chars.visible || 0,
        a.full.chars.reasoning || 0, a.full.chars.reasoning_field || 0)) + ' characters; the first ' +
        fmtInt(D.preview_chars) + ' of each text are shown)');
      all.type = 'button';
      all.addEventListener('click', function () {
        all.disabled = true; all.textContent = 'loading…';
        loadReply(a.full.key, function (full) {
          if (full == null) { all.textContent = 'the reply file could not be loaded'; return; }
          Object.keys(full).forEach(function (k) { a[k] = full[k]; }); delete a.full;
          art.parentNode.replaceChild(renderAnswer(a, inst, s), art);
        });
      });
      r.appendChild(all);
    }
    art.appendChild(r);
    var reasons = (a.reasoning_field ? [a.reasoning_field] : []).concat(a.reasoning || []);
    if (reasons.length) {
      var det = el('details', 'reasoning');
      det.appendChild(el('summary', null, 'reasoning (' + fmtInt(reasons.join('').length) + ' characters' +
        (a.reasoning_field ? ', from the provider\'s reasoning field' : '') + ')'));
      reasons.forEach(function (t) { det.appendChild(el('pre', null, t)); });
      art.appendChild(det);
    }
    if (a.reply && a.reply.trim() !== a.visible) {
      var raw = el('details', 'raw'); raw.appendChild(el('summary', null, 'raw reply, as stored'));
      raw.appendChild(el('pre', null, a.reply)); art.appendChild(raw);
    }
    if (a.steps && a.steps.length) {  // --mode repl: the code of each step and what it printed, folded
      var sd = el('details', 'raw'); sd.appendChild(el('summary', null, 'REPL steps (' + a.steps.length + ')'));
      a.steps.forEach(function (s) {
        sd.appendChild(el('span', 'label', 'step ' + s.step + ': ' + s.status +
          (s.sub_calls ? ', ' + s.sub_calls + ' llm_query call' + (s.sub_calls > 1 ? 's' : '') : '')));
        if (s.code != null) sd.appendChild(el('pre', null, s.code));
        if (s.output != null) sd.appendChild(el('pre', null, s.output === '' ? '(nothing printed)' : s.output));
      });
      art.appendChild(sd);
    }
    var pr = a.prompt != null && D.prompts ? D.prompts[a.prompt] : null;
    if (pr) {
      var pm = el('details', 'messages'); pm.appendChild(el('summary', null, 'messages sent (' + pr.variant + ' prompt)'));
      pm.appendChild(el('span', 'label', 'system')); pm.appendChild(el('pre', null, pr.system));
      pm.appendChild(el('span', 'label', 'user')); pm.appendChild(el('pre', null, pr.before));
      pm.appendChild(el('pre', 'ctxmark', pr.context === 'rag' ? '[the retrieved passages]' :
        '[the context: ' + (inst.chars != null ? fmtInt(inst.chars) + ' characters, ' : '') + 'shown in the context pane]'));
      pm.appendChild(el('pre', null, pr.after));
      art.appendChild(pm);
    }
    var meta = [];
    if (a.prompt_tokens != null) meta.push(fmtInt(a.prompt_tokens) + ' prompt tokens');
    if (a.completion_tokens != null) meta.push(fmtInt(a.completion_tokens) + ' completion tokens');
    if (a.cached) meta.push('from the cache');
    if (meta.length) art.appendChild(el('div', 'meta', meta.join(' · ')));
    return art;
  }

  window.ctxbenchContext = function (key, text) {
    window.__ctxbenchContexts = window.__ctxbenchContexts || {};
    window.__ctxbenchContexts[key] = text;
    (pending[key] || []).forEach(function (f) { f(text); }); delete pending[key];
  };
  window.ctxbenchReply = function (key, texts) {
    window.__ctxbenchReplies = window.__ctxbenchReplies || {};
    window.__ctxbenchReplies[key] = texts;
    (pendingReplies[key] || []).forEach(function (f) { f(texts); }); delete pendingReplies[key];
  };
  var pendingReplies = {};
  function loadReply(key, done) {
    var have = window.__ctxbenchReplies && window.__ctxbenchReplies[key];
    if (have != null) return done(have);
    if (pendingReplies[key]) { pendingReplies[key].push(done); return; }
    pendingReplies[key] = [done];
    var sc = document.createElement('script'); sc.src = 'browser/replies/' + key + '.js';
    sc.onerror = function () { (pendingReplies[key] || []).forEach(function (f) { f(null); }); delete pendingReplies[key]; };
    document.head.appendChild(sc);
  }
  var pending = {};
  function loadContext(key, done) {
    var have = window.__ctxbenchContexts && window.__ctxbenchContexts[key];
    if (have != null) return done(have);
    if (pending[key]) { pending[key].push(done); return; }
    pending[key] = [done];
    var sc = document.createElement('script'); sc.src = 'browser/contexts/' + key + '.js';
    sc.onerror = function () { (pending[key] || []).forEach(function (f) { f(null); }); delete pending[key]; };
    document.head.appendChild(sc);
  }
  function renderContext(box, text, spans) {
    box.textContent = '';
    if (text == null) { box.appendChild(el('span', 'empty', 'the context file could not be loaded')); return; }
    var pos = 0;
    (spans || []).forEach(function (sp) {
      if (sp[0] > pos) box.appendChild(document.createTextNode(text.slice(pos, sp[0])));
      box.appendChild(el('mark', 'evidence', text.slice(sp[0], sp[1]))); pos = sp[1];
    });
    box.appendChild(document.createTextNode(text.slice(pos)));
  }
  function contextBlock(inst) {
    var det = el('details', 'context');
    var n = inst.spans ? inst.spans.length : 0;
    det.appendChild(el('summary', null, 'context (' + fmtInt(inst.context_tokens) + ' tokens, ' +
      fmtInt(inst.chars) + ' characters' + (inst.spans == null ? '; evidence could not be located' :
      (n ? '; ' + n + ' evidence span' + (n > 1 ? 's' : '') + ' highlighted' : '; no evidence spans')) + ')'));
    var bar = el('div', 'ctxbar'), box = el('pre', 'ctx', 'loading…');
    det.appendChild(bar); det.appendChild(box);
    var at = -1;
    det.addEventListener('toggle', function () {
      if (!det.open || det.dataset.loaded) return;
      det.dataset.loaded = '1';
      loadContext(inst.context, function (text) {
        renderContext(box, text, inst.spans);
        var marks = box.querySelectorAll('mark.evidence');
        if (marks.length) {
          var next = el('button', null, 'next evidence ↓'); next.type = 'button';
          next.addEventListener('click', function () {
            at = (at + 1) % marks.length; marks[at].scrollIntoView({block: 'center'});
          });
          bar.appendChild(next); next.click();
        }
      });
    });
    return det;
  }
  function renderInstance(inst, answers, s) {
    var sec = el('section', 'inst'); sec.id = 'inst-' + inst.id; sec.dataset.instance = inst.id;
    var meta = el('div', 'meta');
    meta.appendChild(el('code', null, inst.id));
    meta.appendChild(document.createTextNode(' · ' + fmtInt(inst.length) + ' tokens (' + fmtInt(inst.context_tokens) +
      ' in the context, ' + (inst.tokenizer || '') + ') · '));
    D.facets.forEach(function (fc) {
      var v = inst.facets[fc.key];
      if (v == null || (fc.multi && !v.length) || fc.values.length < 2) return;
      meta.appendChild(el('span', 'chip', fc.label + ': ' + (fc.multi ? v.join(', ') : v)));
    });
    sec.appendChild(meta);
    var q = el('div', 'q'); q.appendChild(el('span', 'label', 'question')); q.appendChild(el('span', 'qtext', inst.question));
    sec.appendChild(q);
    var g = el('div', 'gold'); g.appendChild(el('span', 'label', 'gold answer')); g.appendChild(el('pre', null, inst.gold));
    if (inst.accepted.length) {
      g.appendChild(el('span', 'label', 'also accepted')); g.appendChild(el('pre', null, inst.accepted.join('\n')));
    }
    if (inst.sql) {
      var sq = el('details', 'raw'); sq.appendChild(el('summary', null, 'SQL')); sq.appendChild(el('pre', null, inst.sql));
      g.appendChild(sq);
    }
    sec.appendChild(g);
    if (!answers.length) sec.appendChild(el('div', 'empty', 'no answer stored yet'));
    answers.forEach(function (a) { sec.appendChild(renderAnswer(a, inst, s)); });
    if (inst.context) sec.appendChild(contextBlock(inst));
    return sec;
  }
  function meanScore(list, inst, s) {
    var m = matcherOf(inst, s), v = list.map(function (a) { return a.scores[m]; }).filter(function (x) { return x != null; });
    return v.length ? v.reduce(function (x, y) { return x + y; }, 0) / v.length : null;
  }
  function sortKey(key, inst, list, s) {
    if (key === 'score') { var m = meanScore(list, inst, s); return m == null ? Infinity : m; }
    if (key === 'length') return inst.length;
    if (key === 'id') return inst.id;
    var v = inst.facets[key]; return Array.isArray(v) ? v.join(',') : (v == null ? '' : v);
  }
  function update() {
    var s = state(); writeHash(s);
    var answerFilter = !!(s.model || s.mode || s.score);
    var rows = [];
    D.instances.forEach(function (inst, k) {
      if (!instanceMatches(inst, s)) return;
      if (s.asked && (s.asked === 'answered') !== (byInstance[k].length > 0)) return;
      var list = byInstance[k].filter(function (a) { return answerMatches(a, inst, s); });
      if (answerFilter && !list.length) return;
      rows.push([inst, list, k]);
    });
    if (s.sort) {
      var desc = s.sort[0] === '-', key = desc ? s.sort.slice(1) : s.sort;
      rows.sort(function (x, y) {
        var a = sortKey(key, x[0], x[1], s), b = sortKey(key, y[0], y[1], s);
        var c = a < b ? -1 : (a > b ? 1 : 0); return (desc ? -c : c) || x[2] - y[2];
      });
    }
    var nAns = rows.reduce(function (t, r) { return t + r[1].length; }, 0);
    var cnt = document.getElementById('count');
    cnt.dataset.instances = rows.length; cnt.dataset.answers = nAns;
    cnt.textContent = rows.length + ' instance' + (rows.length === 1 ? '' : 's') + ', ' + nAns + ' answer' +
      (nAns === 1 ? '' : 's') + ' shown (of ' + D.instances.length + ' instances, ' + D.answers.length + ' answers)';
    var list = document.getElementById('list'); list.textContent = '';
    rows.slice(0, shown).forEach(function (r) { list.appendChild(renderInstance(r[0], r[1], s)); });
    if (!rows.length) list.appendChild(el('p', 'empty', 'No instance matches these filters.'));
    var more = document.getElementById('more');
    more.hidden = rows.length <= shown;
    more.textContent = 'show ' + Math.min(PAGE, rows.length - shown) + ' more of ' + (rows.length - shown);
  }
  document.addEventListener('DOMContentLoaded', function () {
    if (!D) { document.getElementById('list').textContent = 'browser/data.js did not load'; return; }
    if (D.span_errors && D.span_errors.length) {
      var w = el('p', 'status', 'Evidence of ' + D.span_errors.length + ' instance(s) could not be located: ' +
        D.span_errors[0]); document.querySelector('header.top').appendChild(w);
    }
    if (D.unasked_note) document.querySelector('header.top').appendChild(el('p', 'unasked', D.unasked_note));
    build(); readHash();
    // fewer than half the instances answered: open on the answered ones (a link's own filters win)
    if (D.open_answered && controls.asked && !window.location.hash && !window.location.search)
      controls.asked.value = 'answered';
    update();
    document.getElementById('more').addEventListener('click', function () { shown += PAGE; update(); });
    window.addEventListener('hashchange', function () { readHash(); shown = PAGE; update(); });
  });
})();
"""


def page_html(title: str = "") -> str:
    """The browser page (its data in ``browser/data.js`` beside it)."""
    t = html.escape(title)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>ctxbench instances{' · ' + t if t else ''}</title><style>{CSS}</style>
<script src="browser/data.js"></script>
<script>{JS}</script>
</head><body>
<header class="top"><a class="back" href="index.html">← report</a><h1>Every answer{' · ' + t if t else ''}</h1>
<div id="filters"></div><p id="count" role="status"></p></header>
<main id="list"></main>
<button id="more" type="button" hidden>show more</button>
</body></html>
"""
