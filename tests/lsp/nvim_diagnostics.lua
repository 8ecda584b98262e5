-- Headless Neovim as a real LSP client: start kerasfit on the current buffer, wait for
-- its diagnostics, write them to $KERASFIT_NVIM_OUT as JSON and quit.
--   KERASFIT_NVIM_CMD='["python","-m","kerasfit","lsp"]' KERASFIT_NVIM_OUT=out.json \
--     nvim --headless --clean model.py -c "luafile nvim_diagnostics.lua"
-- Works with Neovim 0.7 (Debian bookworm's package: vim.lsp.start_client) and newer
-- (vim.lsp.start).

local function fail(msg)
  io.stderr:write("nvim_diagnostics.lua: " .. msg .. "\n")
  vim.cmd("cquit! 3")
end

local cmd = vim.fn.json_decode(os.getenv("KERASFIT_NVIM_CMD") or "null")
local out = os.getenv("KERASFIT_NVIM_OUT")
local timeout = tonumber(os.getenv("KERASFIT_NVIM_TIMEOUT") or "30000")
if type(cmd) ~= "table" or not out then
  fail("set KERASFIT_NVIM_CMD (a JSON list) and KERASFIT_NVIM_OUT")
  return
end

local buf = vim.api.nvim_get_current_buf()
local fname = vim.api.nvim_buf_get_name(buf)
if fname == "" then
  fail("open the fixture file first")
  return
end
vim.bo[buf].filetype = "python"

local published = nil -- the raw LSP notification for this buffer
local default_handler = vim.lsp.handlers["textDocument/publishDiagnostics"]
vim.lsp.handlers["textDocument/publishDiagnostics"] = function(err, result, ctx, config)
  default_handler(err, result, ctx, config)
  if result and vim.uri_to_bufnr(result.uri) == buf then
    published = result
  end
end

local config = {
  name = "kerasfit",
  cmd = cmd,
  root_dir = vim.fn.fnamemodify(fname, ":p:h"),
  init_options = { debounceMs = 50 },
}
local client_id
if vim.lsp.start then
  client_id = vim.lsp.start(config, { bufnr = buf })
else
  client_id = vim.lsp.start_client(config)
  if client_id then
    vim.lsp.buf_attach_client(buf, client_id)
  end
end
if not client_id then
  fail("could not start the language server")
  return
end

if not vim.wait(timeout, function() return published ~= nil end, 20) then
  fail("no diagnostics within " .. timeout .. " ms")
  return
end

local diags = {}
for _, d in ipairs(vim.diagnostic.get(buf)) do
  local lsp = (d.user_data and d.user_data.lsp) or {}
  table.insert(diags, {
    code = d.code or lsp.code,
    lnum = d.lnum, -- 0-based line
    col = d.col, -- 0-based byte column: Neovim converted the server's UTF-16 column
    end_lnum = d.end_lnum,
    end_col = d.end_col,
    message = d.message,
    severity = d.severity,
    source = d.source,
  })
end

local f = assert(io.open(out, "w"))
f:write(vim.fn.json_encode({ version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor),
                             diagnostics = diags, lsp = published.diagnostics }))
f:close()

-- Shut the server down through the protocol (shutdown + exit), then leave.
vim.lsp.stop_client(client_id)
vim.wait(5000, function() return vim.lsp.get_client_by_id(client_id) == nil end, 20)
vim.cmd("qall!")
