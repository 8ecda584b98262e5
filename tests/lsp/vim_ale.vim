" Headless Vim + ALE (Debian's vim-ale) against `kerasfit lsp`: write what ALE shows
" for the opened buffer to $KERASFIT_VIM_OUT as JSON, then quit.
set nocompatible
filetype plugin on
let &runtimepath = $KERASFIT_ALE_DIR . ',' . &runtimepath
let g:ale_lint_on_enter = 1
let g:ale_lint_on_text_changed = 'never'
let g:ale_set_loclist = 0
let g:ale_set_quickfix = 0
let g:ale_echo_cursor = 0
let g:ale_virtualtext_cursor = 'disabled'
runtime plugin/ale.vim
call ale#linter#Define('python', {
\   'name': 'kerasfit',
\   'lsp': 'stdio',
\   'executable': $KERASFIT_VIM_EXE,
\   'command': '%e -m kerasfit lsp',
\   'project_root': {buffer -> fnamemodify(bufname(buffer), ':p:h')},
\   'initialization_options': {'debounceMs': 0},
\})
let g:ale_linters = {'python': ['kerasfit']}
let g:ale_linters_explicit = 1

function! s:Dump() abort
  let l:items = ale#engine#GetLoclist(bufnr(''))
  call writefile([json_encode(l:items)], $KERASFIT_VIM_OUT)
  qa!
endfunction

autocmd BufReadPost,FileType python ++once call timer_start(100, {-> ale#Queue(0)})
let s:tries = 0
function! s:Poll(timer) abort
  let s:tries += 1
  if !empty(ale#engine#GetLoclist(bufnr(''))) || s:tries > 150
    call s:Dump()
  endif
endfunction
call timer_start(100, function('s:Poll'), {'repeat': -1})
