/* src/monitor/render.c: ct_monitor_render, which picks one of the renderers (one file each). */
#include "monitor/monitor_internal.h"

char *ct_monitor_render(const ct_monitor_snapshot *s, ct_monitor_format format) {
  if (!s) CT_FAIL_NULL(CT_EINVAL, "ct_monitor_render: the snapshot is NULL");
  switch (format) {
    case CT_MONITOR_TEXT: return ct__render_text(s);
    case CT_MONITOR_JSON: return ct__render_json(s);
    case CT_MONITOR_CSV: return ct__render_csv(s);
  }
  CT_FAIL_NULL(CT_EINVAL, "ct_monitor_render: unknown format %d (CT_MONITOR_TEXT, _JSON or _CSV)", (int)format);
}
