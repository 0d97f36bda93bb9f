"""faultline's single source of table definitions and taxonomy.

Shipped as ``faultline.schemas`` (the repository keeps it at the top level, as the design
card asks). Everything that needs a column list, a dtype or a component name imports it
from here.
"""

from faultline.schemas.tables import TABLES, VIEWS, Column, Table, View, table

__all__ = ["TABLES", "VIEWS", "Column", "Table", "View", "table"]
