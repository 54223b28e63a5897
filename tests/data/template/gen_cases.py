#!/usr/bin/env python3
# Regenerates jinja_cases.json and qwen3_cases.json beside this file with jinja2 (3.1.6 was used) configured
# as HF transformers apply_chat_template does. Usage: python3 gen_cases.py [path to shared/]
import os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../../shared")
# Reference renderer: jinja2 configured as transformers' apply_chat_template does.
import json, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols
from jinja2.exceptions import TemplateError
def raise_exception(m): raise TemplateError(m)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
def render(src, **ctx): return env.from_string(src).render(**ctx)
# Generates tests/data/template/jinja_cases.json: template + context -> HF/jinja2 reference output.
import json
C = []
def case(name, tpl, **ctx):
    try:
        out = {"expected": render(tpl, **ctx)}
    except Exception as e:
        out = {"error": str(e)}
    C.append({"name": name, "template": tpl, "context": ctx, **out})

# whitespace control
case("text_only", "hello\nworld\n")
case("trailing_newline_kept_once", "a\n\n")
case("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter")
case("lstrip_blocks", "  {% if true %}\n    x\n  {% endif %}\nend")
case("lstrip_not_for_vars", "  {{ 'v' }}\n  {% if 1 %}k{% endif %}")
case("dash_strip", "a   {{- 'b' -}}   c\n  {%- if true -%}  d  {%- endif %}  e")
case("plus_disables_lstrip", "  {%+ if true %}x{% endif %}")
case("comment", "a {# comment #}b\n  {# c2 #}\nc{#- x -#}  d")
case("lstrip_mid_line", "ab  {% if true %}x{% endif %}")
case("crlf_text", "a\r\nb {% if true %}\r\nc{% endif %}")
# expressions
case("arith", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 + 1 }} {{ 10 / 5 }}")
case("floats", "{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0e-5 }} {{ 3.0 }} {{ 123456789.125 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }}")
case("concat", "{{ 'a' + 'b' ~ 1 ~ none ~ true }} {{ [1] + [2, 3] }}")
case("str_repr", "{{ [1, 'a', none, true, 2.5, {'k': \"it's\"}] }} {{ {'a': [1, 2]} }} {{ none }} {{ false }}")
case("compare", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}")
case("logic", "{{ true and 'x' }} {{ false or 'y' }} {{ not 0 }} {{ none or [] }} {{ 0 and 1 }}")
case("in", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ not 'a' in 'abc' }}")
case("ternary", "{{ 'y' if 1 else 'n' }}{{ 'y' if 0 else 'n' }}[{{ 'y' if 0 }}]")
case("string_escapes", "{{ 'a\\nb\\t\\'c\\' \"d\" \\u00e9 \\x41' }}{{ \"q\\\"q\" }}")
case("adjacent_strings", "{{ 'ab' 'cd' }}")
case("unicode", "{{ s }}|{{ s|length }}|{{ s[1] }}|{{ s[::-1] }}|{{ s[1:3] }}", s="héllo 日本")
case("slices", "{{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[1:-1] }} {{ l[5:] }} {{ l[-100:2] }} {{ l[3:0:-1] }}", l=[1, 2, 3, 4])
case("index", "{{ l[0] }} {{ l[-1] }} [{{ l[10] }}] {{ d['a'] }} {{ d.a }} [{{ d.zz }}] {{ l.0 }}", l=[1, 2, 3], d={"a": "A"})
case("dict_order", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}", d={"z": 1, "a": 2, "m": 3})
# undefined
case("undefined", "[{{ nope }}]{% if nope %}T{% else %}F{% endif %}{{ nope is defined }}{{ nope is undefined }}{{ d.x is defined }}", d={})
case("undefined_length", "{{ nope|length }}|{{ nope|default('dflt') }}|{{ ''|default('e', true) }}|{{ none|default('n') }}")
case("undefined_add_error", "{{ nope + 'x' }}")
# tests
case("tests", "{{ 1 is number }}{{ 'a' is string }}{{ none is none }}{{ 1 is not none }}{{ [1] is sequence }}{{ {} is mapping }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ true is boolean }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is true }}{{ false is false }}{{ 'a' is in 'abc' }}{{ 1 is eq 1 }}{{ x is sameas false }}", x=False)
# filters
case("filters_str", "{{ '  hi  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'hello world'|capitalize }}|{{ 'hello world'|title }}|{{ 'Ab'|upper }}{{ 'Ab'|lower }}|{{ 'aXbX'|replace('X', '-') }}|{{ 5|string + '!' }}")
case("filters_seq", "{{ l|length }} {{ l|first }} {{ l|last }} {{ l|join(', ') }} {{ l|reverse|list }} {{ l|sort }} {{ l|sum }} {{ l|min }} {{ l|max }} {{ [1,1,2]|unique|list }}", l=[3, 1, 2])
case("filters_attr", "{{ ms|map(attribute='role')|join(',') }} {{ ms|selectattr('role', 'equalto', 'user')|list|length }} {{ ms|rejectattr('role', 'eq', 'user')|map(attribute='content')|list }} {{ ms|selectattr('x')|list }}", ms=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "x": 1}])
case("filters_map_name", "{{ ['a','b']|map('upper')|join }} {{ [1, 0, 2]|select|list }} {{ [1, 2, 3]|reject('odd')|list }}")
case("tojson", "{{ d|tojson }}\n{{ d|tojson(indent=2) }}\n{{ [] | tojson }} {{ {} | tojson }} {{ 'x\"\\n\u00e9'|tojson }} {{ none|tojson }} {{ 1.5|tojson }}", d={"name": "get_weather", "params": {"type": "object", "b": [1, 2.0, None, True, "日本\u00e9\"\\\n\t<>&'"]}, "a": {}})
case("tojson_sort", "{{ d|tojson(sort_keys=true) }}", d={"b": 1, "a": 2})
case("items_filter", "{% for k, v in d|items %}{{ k }}:{{ v }} {% endfor %}", d={"x": 1, "y": [2]})
case("dictsort", "{% for k, v in d|dictsort %}{{ k }}{{ v }}{% endfor %}", d={"b": 1, "A": 2, "c": 0})
case("int_float_abs_round", "{{ '42'|int + 1 }} {{ 'x'|int }} {{ 3.7|int }} {{ '2.5'|float }} {{ -3|abs }} {{ 2.567|round(2) }} {{ 2.5|round }} {{ 7|float }}")
case("indent", "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}")
case("escape_safe", "{{ '<a>&'|e }} {{ '<b>'|safe }}")
# methods
case("str_methods", "{{ '  x  '.strip() }}|{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ 'x\\n\\n'.rstrip('\\n') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith(('x', 'a')) }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'hello'.find('l') }}|{{ '-'.join(['a', 'b']) }}|{{ 'ab cd'.title() }}|{{ 'aBC'.capitalize() }}")
case("think_split", "{% set c = m.split('</think>')[-1].lstrip('\\n') %}{% set r = m.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}[{{ c }}][{{ r }}]", m="<think>\nreason here\n</think>\n\nanswer")
case("dict_methods", "{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }}", d={"a": 1, "b": 2})
# statements
case("for_loop_vars", "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}]{{ loop.cycle('a', 'b') }};{% endfor %}", l=["p", "q", "r"])
case("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}{% for x in [1] %}{{ x }}{% else %}no{% endfor %}")
case("for_if_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }}{% if not loop.last %},{% endif %}{% endfor %}")
case("for_unpack", "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}{% for (a, b) in [(5, 6)] %}{{ a }}{{ b }}{% endfor %}")
case("for_string_dict", "{% for c in 'ab' %}{{ c }}.{% endfor %}{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}")
case("nested_loops", "{% for i in range(3) %}{% for j in range(i) %}{{ i }}{{ j }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}")
case("range", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }}")
case("set_scoping", "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}{% if true %}{% set y = 5 %}{% endif %}{{ y }}")
case("namespace", "{% set ns = namespace(n=0, found=false) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.n }}{{ ns.found }}")
case("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}")
case("set_block", "{% set body %}  x {{ 1 + 1 }}\n{% endset %}[{{ body }}]")
case("if_elif", "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %} {% endfor %}")
case("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}")
case("macro_recursive", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n }}*{{ fact(n - 1) }}{% endif %}{% endmacro %}{{ fact(5) }}")
case("macro_sees_globals", "{% set g = 'G' %}{% macro m() %}{{ g }}{{ top }}{% endmacro %}{{ m() }}", top="T")
case("break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}")
case("raise_in_branch", "{% if messages[0].role != 'system' %}{{ raise_exception('First message must be system') }}{% endif %}ok", messages=[{"role": "user"}])
case("dict_literal", "{% set d = {'a': 1, 'b': {'c': [1, 2]}} %}{{ d.b.c[1] }}{{ d|tojson }}")
case("filter_precedence", "{{ -3|abs }} {{ l|length - 1 }} {{ 'a' ~ l|length }} {{ not l|length }}", l=[1, 2])
case("messages_reverse_index", "{% for m in ms[::-1] %}{% set i = (ms|length - 1) - loop.index0 %}{{ i }}{{ m }}{% endfor %}", ms=["a", "b", "c"])
case("none_vs_undefined", "{% if x is none %}N{% endif %}{% if y is none %}N2{% endif %}{% if x is defined %}D{% endif %}", x=None)


# Chat-template-shaped cases (written in the style of common HF templates) over a shared conversation.
CONV = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <there> & \"you\""},
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "  2+2?\n"}]
TOOLS = [{"type": "function", "function": {"name": "calc", "description": "Evaluate ½ + x", "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]}}}]
def chat_case(name, tpl, messages=CONV, **kw):
    case(name, tpl, messages=messages, bos_token="<s>", eos_token="</s>", add_generation_prompt=True, **kw)
chat_case("style_chatml", "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
chat_case("style_mistral", """{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
""")
chat_case("style_mistral_bad_order", "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% endfor %}")
chat_case("style_gemma", """{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set first = messages[0]['content'] + '\n\n' %}{% set loop_messages = messages[1:] %}{% else %}{% set first = '' %}{% set loop_messages = messages %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + (first if loop.first else '') + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}""")
chat_case("style_llama31_tools", """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions." }}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
""", messages=CONV + [{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": {"expr": "2+2"}}}]}, {"role": "tool", "content": "4"}], tools=TOOLS)
chat_case("style_deepseek_ns", """{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = namespace(is_first=false, is_tool=false, system_prompt='', is_first_sp=true) %}{%- for message in messages %}{%- if message['role'] == 'system' %}{%- if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}{% set ns.is_first_sp = false %}{%- else %}{% set ns.system_prompt = ns.system_prompt + '\n\n' + message['content'] %}{%- endif %}{%- endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is not none %}{% set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor -%}{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\n'}}{% endif %}""",
          messages=CONV[:3] + [{"role": "assistant", "content": "<think>hmm</think>Sure."}, {"role": "user", "content": "ok"}])
chat_case("style_phi3_macro", """{% macro render(role, text) -%}
<|{{ role }}|>
{{ text | trim }}<|end|>
{% endmacro -%}
{% for message in messages -%}
{{ render(message['role'], message['content']) }}
{%- endfor %}
{% if add_generation_prompt %}<|assistant|>
{% endif %}""")

json.dump(C, open(os.path.join(HERE, 'jinja_cases.json'), 'w'), indent=1, ensure_ascii=False)
for c in C:
    if "error" in c: print("ERR", c["name"], c["error"])
print(len(C), "cases")
t = json.load(open(os.path.join(SHARED, 'tokenizers/qwen3/tokenizer_config.json')))['chat_template']
tools = [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city (°C).",
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. \"Zürich\""},
                                                          "days": {"type": "integer"}}, "required": ["city"]}}},
         {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}}]
C = []
def case(name, messages, tools=None, add_generation_prompt=True, extra=None):
    ctx = dict(messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt, bos_token="", eos_token="<|im_end|>")
    ctx.update(extra or {})
    C.append({"name": name, "messages": messages, "tools": tools, "add_generation_prompt": add_generation_prompt, "extra": extra, "expected": render(t, **ctx)})
case("tools_tool_calls", [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Weather in Zürich and Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}},
        {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "tool", "content": "{\"temp\": 19}"},
    {"role": "assistant", "content": "<think>\nBoth fetched.\n</think>\n\nZürich 21°C, Paris 19°C."},
    {"role": "user", "content": "Thanks"}], tools=tools)
case("tools_no_system", [{"role": "user", "content": "hi"}], tools=tools, add_generation_prompt=False)
case("reasoning_content_last_turn", [
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "4", "reasoning_content": "\nsimple sum\n"}], add_generation_prompt=False)
case("think_in_content_history", [
    {"role": "user", "content": "q1"},
    {"role": "assistant", "content": "<think>\nr1\n</think>\n\na1"},
    {"role": "user", "content": "q2"}])
case("tool_call_with_content_then_response", [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": "Let me check.", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
    {"role": "tool", "content": "cold"}], tools=tools)
case("enable_thinking_false", [{"role": "user", "content": "hi"}], extra={"enable_thinking": False})
json.dump(C, open(os.path.join(HERE, 'qwen3_cases.json'), 'w'), indent=1, ensure_ascii=False)

